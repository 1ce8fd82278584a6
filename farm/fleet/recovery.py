"""The recovery actuator: applies the ladder's next step to one device.

:func:`farm.supervise.ladder.next_step` decides from the device's history, read
from the database (:mod:`farm.fleet.history`); this applies the rung of that
name from the device's controller
(:meth:`~farm.controllers.base.DeviceController.recovery_steps`), checks the
server registered again, and records the outcome (``Recovery(step, ok)``) so the
next decision, by this farmd or the next one, climbs or resets. A rung the
device's kind does not have counts as a failed try, so the ladder climbs past
it (a board has no reinstall).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import structlog

from farm.errors import FarmError, PhoneFault
from farm.fleet.lifecycle import Move
from farm.fleet.ports import DeviceBook
from farm.queue.models import DeviceHealth, DeviceState
from farm.queue.records import DeviceRecord
from farm.supervise.ladder import Recovery, Step, Wait, next_step

if TYPE_CHECKING:
    from farm.metrics import FarmMetrics

__all__ = ["RECOVERABLE", "RecoveredFleet", "Recoverer", "healable"]

log = structlog.get_logger(__name__)

#: States in which the ladder may act on a phone. Not ``busy`` (a claim since
#: the sweep: restarting the app would kill the job's session), nor a phone that
#: left adb, is being set up, or is quarantined.
RECOVERABLE = frozenset({DeviceState.READY, DeviceState.COOLING, DeviceState.UNHEALTHY})


def healable(record: DeviceRecord) -> bool:
    """Whether the ladder may act on the device now: recoverable, or held and asked for a key.

    A device whose hold asks it to serve a key (``serve_key``: a tuning
    attempt's) is healed while busy: its attempt waits for the key at the
    tracker and resumes, so a crash there is an ordinary incident
    (:mod:`farm.fleet.serving`). Any other busy device is left to its attempt.
    """
    return record.state in RECOVERABLE or (
        record.state is DeviceState.BUSY and record.serve_key is not None)


class RecoveredFleet(DeviceBook, Protocol):
    """What the recoverer reads and asks of the fleet beyond its bookkeeping."""

    metrics: FarmMetrics | None
    tracker_generation: int

    def set_health(self, record: DeviceRecord, health: DeviceHealth, reason: str) -> None:
        """Set the device's health with its reason, if it changes."""
        ...

    def wait_registered(self, serial: str) -> None:
        """Block until the device's key is at the tracker.

        Raises:
            PhoneFault: not within the registration deadline.
        """
        ...


class Recoverer:
    """Climbs the recovery ladder for the fleet's devices."""

    def __init__(self, fleet: RecoveredFleet) -> None:
        self.m = fleet

    def recover(self, serial: str) -> None:
        """Apply the next step for ``serial`` if the ladder says one is due now.

        A device held to serve a key is healed, not quarantined by its
        incident count (``next_step(..., held=True)``): its attempt waits for
        the key at the tracker and would wait for a quarantined server forever.
        """
        record = self.m.store.get_device(serial)
        held = (record is not None and record.state is DeviceState.BUSY
                and record.serve_key is not None)
        history = self.m.history(serial)
        now = self.m.clock.now()
        step = next_step(history, now, self.m.options.ladder, held=held)
        if step is None or isinstance(step, Wait):
            if isinstance(step, Wait):
                log.info("recovery_backoff", serial=serial, until=step.until.isoformat())
            return
        if step is Step.QUARANTINE:
            self._quarantine(serial, len(history))
            return
        if record is None or not healable(record):
            log.info("recovery_skipped", serial=serial, step=step.value,
                     state=record and record.state.value)
            return
        log.info("recovery_step", serial=serial, step=step.value)
        if self.m.metrics is not None:
            self.m.metrics.count_recovery(serial, step.value)
        ok = comes_back_alone = False
        try:
            comes_back_alone = self._apply(serial, step)
            ok = True
        except FarmError as exc:
            log.warning("recovery_step_failed", serial=serial, step=step.value, reason=str(exc))
        self.m.record(serial, Recovery(self.m.clock.now(), step, ok))
        if ok and not comes_back_alone:  # a rebooted device comes back through discovery
            reason = f"recovered by {step.value}"
            self.m.settle(serial, lambda r: Move(DeviceState.READY, reason)
                          if r.state is DeviceState.UNHEALTHY else None)

    def _quarantine(self, serial: str, events: int) -> None:
        reason = f"recovery gave up after {events} events; release with `farmctl release`"
        record, move = self.m.settle(serial, lambda r: Move(DeviceState.QUARANTINED, reason)
                                     if r.state in RECOVERABLE else None)
        if record is None or move is None:
            return  # claimed, unplugged or being set up since: the ladder asks again later
        log.info("recovery_step", serial=serial, step=Step.QUARANTINE.value)
        if self.m.metrics is not None:
            self.m.metrics.count_recovery(serial, Step.QUARANTINE.value)
        # The move into quarantined is the history's record of it (farm.fleet.history).
        self.m.set_health(record, DeviceHealth.BAD, "quarantined: recovery gave up")

    def _apply(self, serial: str, step: Step) -> bool:
        """Run the device's rung named ``step``; returns whether it comes back by itself.

        Raises:
            PhoneFault: the kind has no such rung, the rung failed, or the
                server did not register again in time.
        """
        controller = self.m.controller(serial)
        rung = next((r for r in controller.recovery_steps(serial) if r.name == step.value), None)
        if rung is None:
            raise PhoneFault(serial, f"a {controller.kind} device has no {step.value} step")
        self.m.runtime(serial).served_generation = self.m.tracker_generation
        rung.run()
        if not rung.comes_back_alone:
            # A reboot leaves the transport; discovery sees it come back and provisions it.
            self.m.wait_registered(serial)
        return rung.comes_back_alone
