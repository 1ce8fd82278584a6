"""Peak memory of the process serving a device's RPC session, read once the model ran.

The attempt child reads it through the device's controller, as it reads the
thermal gate's readings (:class:`farm.runner.gating.ControllerGate`): the
runner never speaks adb. Only kinds that implement
:class:`farm.controllers.base.AppMemoryReader` have the reading (phones:
``VmHWM`` of the RPC app's process); for the others, and when a reading
fails, the result keeps None: a missing memory figure is logged, it does not
fail a benchmark whose latency was measured.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from farm.controllers.base import AppMemoryReader, DeviceController
from farm.errors import FarmError

__all__ = ["AppMemory"]

log = structlog.get_logger(__name__)


class AppMemory:
    """``app_memory(serial)``: the peak resident memory (KiB) of its RPC session's process.

    Args:
        controller_of: the controller of a device's kind, by serial (the gate's,
            :meth:`farm.runner.gating.ControllerGate.controller`).
    """

    def __init__(self, controller_of: Callable[[str], DeviceController]) -> None:
        self._controller_of = controller_of

    def __call__(self, serial: str) -> int | None:
        """The reading; None where the kind has none or it failed (logged)."""
        try:
            controller = self._controller_of(serial)
            if not isinstance(controller, AppMemoryReader):
                return None
            return controller.app_peak_memory_kb(serial)
        except FarmError as exc:
            log.warning("app_memory_unread", serial=serial, reason=str(exc))
            return None
