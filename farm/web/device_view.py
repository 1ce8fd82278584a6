"""The device page's data: a device's readings over time and the tail of its log.

Its state, health and events come from the API's ``/api/v1/devices/{serial}``;
this adds the health samples farmd stored (battery %, °C, thermal status over
time) and, for a phone, the last lines of ``logcat -d`` read through the host's
adb server (an argv list, a deadline). A phone farmd cannot reach answers an
empty log with the reason, never a 500.
"""

from __future__ import annotations

from typing import Any

from farm.config import Settings
from farm.controllers.base import ANDROID
from farm.errors import FarmError
from farm.jsonable import plain
from farm.queue.store import Store

__all__ = ["LOG_LINES", "LOG_TIMEOUT_S", "READINGS", "log_view", "readings_view"]

#: Health samples the page charts, newest first.
READINGS = 200
#: Lines of logcat the page shows.
LOG_LINES = 200
#: Deadline of the logcat read (s): the page polls, a stuck phone must not hold it.
LOG_TIMEOUT_S = 5.0


def readings_view(store: Store, serial: str, limit: int = READINGS) -> list[dict[str, Any]]:
    """The device's stored health samples, oldest first, as JSON values."""
    return [plain(sample) for sample in reversed(store.health_samples(serial, limit))]


def log_view(store: Store, settings: Settings, serial: str,
             lines: int = LOG_LINES) -> dict[str, Any]:
    """The tail of the device's log: ``{"source", "lines", "error"}``.

    Phones: ``logcat -d -t LINES`` (the whole ring buffer's last lines). Other
    kinds have no log farm can read here (``source`` None, with why).
    """
    device = store.get_device(serial)
    if device is None or device.kind != ANDROID:
        return {"source": None, "lines": [], "error": "only phones have a logcat"}
    from farm.adb import Adb, AdbServer

    adb = Adb(AdbServer(port=settings.adb.port, binary=settings.adb.binary))
    try:
        result = adb.shell(serial, ["logcat", "-d", "-t", str(lines)], timeout_s=LOG_TIMEOUT_S)
    except FarmError as exc:
        return {"source": "logcat", "lines": [], "error": str(exc)}
    return {"source": "logcat", "lines": result.out.splitlines()[-lines:], "error": None}
