"""The recovery actuator: applies the ladder's next step to one phone.

:func:`farm.supervise.ladder.next_step` decides from the phone's history; this
applies the step, checks the app registered again, and appends the outcome
(``Recovery(step, ok)``) so the next decision climbs or resets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from farm.errors import FarmError, PhoneFault
from farm.provision.apk import ensure_installed
from farm.provision.launch import PACKAGE, stop_app
from farm.provision.policy import ClashPolicy
from farm.queue.models import DeviceState
from farm.supervise.ladder import Recovery, Released, Step, Wait, next_step

if TYPE_CHECKING:
    from farm.fleet.manager import FleetManager

log = structlog.get_logger(__name__)


class Recoverer:
    """Climbs the recovery ladder for the manager's phones."""

    def __init__(self, manager: FleetManager) -> None:
        self.m = manager

    def recover(self, serial: str) -> None:
        """Apply the next step for ``serial`` if the ladder says one is due now."""
        phone = self.m.runtime(serial)
        now = self.m.clock.now()
        step = next_step(phone.history, now, self.m.options.ladder)
        if step is None or isinstance(step, Wait):
            if isinstance(step, Wait):
                log.info("recovery_backoff", serial=serial, until=step.until.isoformat())
            return
        log.info("recovery_step", serial=serial, step=step.value)
        if self.m.metrics is not None:
            self.m.metrics.count_recovery(serial, step.value)
        if step is Step.QUARANTINE:
            phone.history.append(Recovery(now, step, True))
            self.m.move(serial, DeviceState.QUARANTINED,
                        f"recovery gave up after {len(phone.history)} events; "
                        "release with `farmctl release`")
            return
        ok = False
        try:
            self._apply(serial, step)
            ok = True
        except FarmError as exc:
            log.warning("recovery_step_failed", serial=serial, step=step.value, reason=str(exc))
        phone.history.append(Recovery(self.m.clock.now(), step, ok))
        if ok and step is not Step.REBOOT:  # a rebooted phone comes back through discovery
            self.m.move(serial, DeviceState.READY, f"recovered by {step.value}")

    def _apply(self, serial: str, step: Step) -> None:
        adb = self.m.adb
        if step is Step.RESTART_APP:
            self.m.launch(serial)
        elif step is Step.FORCE_STOP_RELAUNCH:
            stop_app(adb, serial)
            self.m.launch(serial)
        elif step is Step.REINSTALL:
            if self.m.options.apk is None:
                raise PhoneFault(serial, "no APK configured to reinstall")
            adb.shell(serial, ["pm", "uninstall", "-k", PACKAGE], timeout_s=60)
            ensure_installed(adb, serial, self.m.options.apk, ClashPolicy.FAIL)
            self.m.launch(serial)
        elif step is Step.REBOOT:
            # The phone leaves adb; the tracker sees it come back and provisions it.
            adb.reboot(serial, timeout_s=30)

    def released(self, serial: str) -> None:
        """Forget the phone's history, quarantine included (``farmctl release``)."""
        phone = self.m.runtime(serial)
        phone.history.append(Released(self.m.clock.now()))
        phone.blocked = None
        self.m.move(serial, DeviceState.DISCOVERED, "released by an operator")
