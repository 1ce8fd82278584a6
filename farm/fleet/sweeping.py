"""The health sweep: every watched device read, stored and judged, and the hand-session watch.

farmd runs :meth:`Sweeper.sweep` every ``health.interval_s`` and
:meth:`Sweeper.watch_held` every ``health.held_interval_s``. Each device's
reading comes from its controller on the sweep's own pool
(:mod:`farm.fleet.workers`); :func:`farm.health.verdict.verdict` judges it and
:meth:`Sweeper.judge` applies the verdict as a compare-and-set, handing a dead
server to the recovery ladder.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import structlog

from farm.errors import PhoneFault
from farm.fleet import lifecycle
from farm.fleet.ports import DeviceBook
from farm.fleet.recovery import healable
from farm.fleet.workers import SweepPool
from farm.health.verdict import app_down, app_failure_reasons, cool_enough, verdict
from farm.queue.models import DeviceHealth, DeviceState
from farm.supervise.ladder import Failure, incident_open

if TYPE_CHECKING:
    from farm.controllers.base import DeviceController
    from farm.fleet.held import HeldWatch
    from farm.fleet.probing import Prober
    from farm.fleet.serving import Serving
    from farm.health.sample import HealthSample
    from farm.metrics import FarmMetrics
    from farm.queue.records import DeviceRecord
    from farm.tvm.tracker import TrackerSummary

__all__ = ["SWEEP_WAIT_S", "Sweeper", "SweptFleet"]

log = structlog.get_logger(__name__)

#: A sweep waits this long for its phones: each phone's adb probe has its own
#: deadline (``farm.controllers.android_health.PROBE_TIMEOUT_S``), well within it.
SWEEP_WAIT_S = 60.0


class SweptFleet(DeviceBook, Protocol):
    """What the sweep reads and asks of the fleet beyond its bookkeeping."""

    controllers: dict[str, DeviceController]
    metrics: FarmMetrics | None

    def own_devices(self) -> list[DeviceRecord]:
        """The devices this host runs."""
        ...

    def discover(self) -> None:
        """Ask the controllers of untracked kinds what they see."""
        ...

    def submit(self, serial: str, task: Callable[[str], None]) -> bool:
        """Run ``task(serial)`` on its own thread unless a slow task runs for the device."""
        ...

    def set_health(self, record: DeviceRecord, health: DeviceHealth, reason: str) -> None:
        """Set the device's health with its reason, if it changes."""
        ...

    def tracker_summary(self, max_age_s: float = 0.0,
                        quiet: bool = False) -> TrackerSummary | None:
        """The tracker's summary, or None."""
        ...


class Sweeper:
    """Sweeps the fleet's devices and judges each reading.

    Args:
        fleet: the fleet's bookkeeping.
        serving: reconciles each device's key on every pass.
        held: judges hand sessions from a tracker summary.
        prober: starts a ready device's session probe.
        watch: starts a device's app watch (one that ended is started again).
        provision: provisions a discovered device (run on its task thread).
        recover: climbs the recovery ladder for a device (run on its task thread).
    """

    def __init__(self, fleet: SweptFleet, serving: Serving, held: HeldWatch, prober: Prober,
                 watch: Callable[[str], None], provision: Callable[[str], None],
                 recover: Callable[[str], None]) -> None:
        self.m = fleet
        self._serving = serving
        self._held = held
        self._prober = prober
        self._watch = watch
        self._provision = provision
        self._recover = recover
        self._pool = SweepPool("farm-sweep")
        self._sweeps = 0

    def _served(self) -> list[DeviceRecord]:
        # Devices of a kind this farmd has no controller for are another farmd's.
        return [d for d in self.m.own_devices() if d.kind in self.m.controllers]

    def _keys(self, devices: list[DeviceRecord]) -> Mapping[str, str]:
        return {d.serial: self.m.runtime(d.serial).key for d in devices}

    def watch_held(self) -> set[str]:
        """Judge hand sessions between sweeps from one tracker summary; returns the held serials.

        farmd calls it every ``health.held_interval_s`` (1 s): a person's own
        session on a phone is then seen before a job is sent there, and its end
        frees the phone at once (:class:`~farm.fleet.held.HeldWatch`).
        """
        devices = self._served()
        self._serving.reconcile(devices)
        if not any(d.state is DeviceState.READY or d.held_outside is not None
                   for d in devices):
            return set()  # only a ready phone can be held: no tracker request
        found = self.m.tracker_summary(quiet=True)
        return self._held.update(devices, self._keys(devices), found,
                                 lambda serial: self.m.runtime(serial).probing)

    def sweep(self) -> int:
        """Probe every watched phone in parallel and act on the verdicts; returns how many.

        Discovered phones (released from quarantine, or a provisioning that never
        started: a replug, a reboot rung) are (re)provisioned on their own
        threads; the sweep does not wait for them.
        """
        self.m.discover()
        devices = self._served()
        for device in devices:
            if device.state is DeviceState.DISCOVERED:
                self.m.submit(device.serial, self._provision)
        self._serving.reconcile(devices)
        watched = [d.serial for d in devices
                   if d.state in lifecycle.WATCHED or d.state is DeviceState.BUSY]
        for serial in watched:
            self._watch(serial)  # the sweep restarts a watcher that ended
        found = self.m.tracker_summary()
        keys = None if found is None else {s.key for s in found.servers}
        # A phone a hand session holds is neither probed nor judged "not registered".
        held = self._held.update(devices, self._keys(devices), found,
                                 lambda serial: self.m.runtime(serial).probing)
        self._sweeps += 1
        every = self.m.options.probe_every_sweeps
        probe = bool(every) and self._sweeps % every == 0
        late = self._pool.run_all(
            [functools.partial(self._sweep_one, serial, keys, probe and serial not in held,
                               serial in held)
             for serial in watched],
            SWEEP_WAIT_S)
        if late:
            log.warning("sweep_late", phones=late, wait_s=SWEEP_WAIT_S)
        return len(watched)

    def _sweep_one(self, serial: str, keys: set[str] | None, probe: bool = False,
                   held: bool = False) -> None:
        """Read, store and act on one phone's health; start its session probe if due.

        The probe runs on its own thread, after the reading shows the app up and
        registered: a frozen app holds a probe for its whole timeout, and that
        must not hold the sweep (and so every other phone's next sweep) too.
        """
        m = self.m
        phone = m.runtime(serial)
        now = m.clock.now()
        registered = None if keys is None or held else phone.key in keys
        try:
            sample = m.controller(serial).read_health(serial, now, registered=registered)
        except PhoneFault as exc:
            log.warning("health_probe_failed", serial=serial, reason=str(exc))
            return
        m.store.upsert_device(serial, now)  # last seen: this sweep
        if m.metrics is not None:
            m.metrics.observe_health(sample)
        m.store.record_health(serial, now, {
            "screen_on": sample.screen_on, "app_running": sample.app_running,
            "registered": sample.registered,
        }, sample.readings)
        self.judge(serial, sample)
        if probe and sample.app_running and sample.registered:
            self._prober.start(serial, sample)

    def judge(self, serial: str, sample: HealthSample) -> None:
        """Move the phone as the sample's verdict says and set its health.

        Climbs the ladder if its app is down. A busy phone, or one a slow task
        owns, is left alone.
        """
        m = self.m
        phone = m.runtime(serial)
        if phone.busy_task:
            return
        record = m.store.get_device(serial)
        if record is not None and record.state is DeviceState.BUSY:
            # Only a hold that asks for a key is the ladder's (healable): a plain
            # attempt's session would die with a restart of its server.
            if healable(record) and app_down(sample) and phone.blocked is None:
                if not incident_open(m.history(serial), sample.at):
                    m.record(serial, Failure(sample.at, "; ".join(app_failure_reasons(sample))))
                m.submit(serial, self._recover)
            return
        judged = verdict(sample, m.options.limits)
        cool = cool_enough(sample, m.options.limits)
        record, _ = m.settle(serial, lambda r: lifecycle.on_verdict(r.state, judged, cool=cool))
        if record is None or record.state not in lifecycle.WATCHED:
            return
        health = lifecycle.health_of(judged)
        if health is not None:
            m.set_health(record, *health)
        if app_down(sample) and phone.blocked is None:
            if not incident_open(m.history(serial), sample.at):
                m.record(serial, Failure(sample.at, "; ".join(app_failure_reasons(sample))))
            m.submit(serial, self._recover)

    def close(self) -> None:
        """Stop the sweep's pool (farmd stops)."""
        self._pool.close()
