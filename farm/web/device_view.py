"""The device page's data: a device's readings over time and the tail of its log.

Its state, health and events come from the API's ``/api/v1/devices/{serial}``;
this adds the health samples farmd stored (battery %, °C, thermal status over
time) and the last lines of the device's own log, read through its kind's
controller (:class:`~farm.controllers.capabilities.LogReader`: a phone's
``logcat -d``, with a deadline). A device farm cannot reach answers an empty
log with the reason, never a 500.
"""

from __future__ import annotations

from typing import Any

from farm.config import Settings
from farm.controllers import ControllerContext, controller_for
from farm.controllers.capabilities import LogReader
from farm.errors import FarmError
from farm.jsonable import plain
from farm.queue.store import Store

__all__ = ["LOG_LINES", "READINGS", "log_view", "readings_view"]

#: Health samples the page charts, newest first.
READINGS = 200
#: Lines of logcat the page shows.
LOG_LINES = 200


def readings_view(store: Store, serial: str, limit: int = READINGS) -> list[dict[str, Any]]:
    """The device's stored health samples, oldest first, as JSON values."""
    return [plain(sample) for sample in reversed(store.health_samples(serial, limit))]


def log_view(store: Store, settings: Settings, serial: str,
             lines: int = LOG_LINES) -> dict[str, Any]:
    """The tail of the device's log: ``{"source", "lines", "error"}``.

    Phones: ``logcat -d -t LINES`` (the whole ring buffer's last lines). Kinds
    whose controller reads no log have none here (``source`` None, with why).
    """
    device = store.get_device(serial)
    if device is None:
        return {"source": None, "lines": [], "error": "only phones have a logcat"}
    try:
        controller = controller_for(device.kind, ControllerContext(settings))
    except FarmError as exc:  # a kind this host does not know
        return {"source": None, "lines": [], "error": str(exc)}
    if not isinstance(controller, LogReader):
        return {"source": None, "lines": [], "error": "only phones have a logcat"}
    try:
        tail = controller.log_tail(serial, lines)
    except FarmError as exc:
        return {"source": controller.log_source, "lines": [], "error": str(exc)}
    return {"source": controller.log_source, "lines": tail, "error": None}
