"""The fleet manager: acts on adb events and health sweeps, one phone at a time.

Decisions are pure and live elsewhere: lifecycle moves and health in
:mod:`farm.fleet.lifecycle`, conditions in :mod:`farm.health.verdict`, recovery
in :mod:`farm.supervise.ladder`, the install policy in
:mod:`farm.provision.policy`. This module gathers observations, asks those
functions, and applies the answers through adb and the store.

Every state write is a compare-and-set on the state and attempt just read
(:meth:`FleetManager.settle`): a claim, a release or another writer that moved
the phone in between wins, and the phone is judged again on fresh data. Slow
work (provisioning, recovery, relaunch, session probes) runs on a thread of its
own, at most one slow task and one probe per phone; sweeps run on their own
pool (:mod:`farm.fleet.workers`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import structlog

from farm.adb import Adb
from farm.aio import LoopThread
from farm.clock import Clock
from farm.errors import ConfigError, FarmError, PhoneFault, UserFault
from farm.fleet import lifecycle
from farm.fleet.app_watch import AppWatch
from farm.fleet.held import HeldWatch
from farm.fleet.history import HISTORY_EVENTS, events_to_history, reason_of
from farm.fleet.keys import phone_key
from farm.fleet.lifecycle import Move
from farm.fleet.options import FleetOptions
from farm.fleet.phone import PhoneRuntime
from farm.fleet.probing import Prober
from farm.fleet.recovery import RECOVERABLE, Recoverer
from farm.fleet.workers import SweepPool, TaskThreads
from farm.health.probes import read_health
from farm.health.sample import HealthSample
from farm.health.verdict import app_down, app_failure_reasons, cool_enough, verdict
from farm.metrics import FarmMetrics
from farm.provision.apk import ensure_installed, installed_version
from farm.provision.app_target import app_target_for, detect_method
from farm.provision.facts import facts_record, read_facts
from farm.provision.launch import PACKAGE, launch_app
from farm.provision.tunnels import close_usb_tunnel, open_usb_tunnel
from farm.queue.models import DeviceHealth, DeviceState
from farm.queue.records import DeviceRecord
from farm.queue.store import Store
from farm.supervise.ladder import Event, Failure, incident_open
from farm.tvm.probe import read_gpu_limits
from farm.tvm.tracker import TrackerSummary, summary

__all__ = ["FleetManager", "FleetOptions"]

log = structlog.get_logger(__name__)

#: Compare-and-set tries of one decision before giving up until the next
#: observation: each lost race means another writer moved the phone just now.
SETTLE_TRIES = 3
#: How long :meth:`FleetManager.close` waits for running tasks; they stop at
#: their next wait, or when their adb call's own deadline ends.
CLOSE_DEADLINE_S = 15.0
#: A sweep waits this long for its phones: each phone's adb probe has its own
#: deadline (``farm.health.probes.PROBE_TIMEOUT_S``), well within it.
SWEEP_WAIT_S = 60.0
#: How often a phone waiting for its app's registration looks at the tracker.
REGISTRATION_POLL_S = 0.5

Decide = Callable[[DeviceRecord], Move | None]


class FleetManager:
    """Keeps every phone provisioned, watched and healed.

    Thread-safe: ``on_adb_state`` is called from the device tracker's thread,
    ``sweep`` from the scheduler's.
    """

    def __init__(
        self, options: FleetOptions, adb: Adb, store: Store, clock: Clock, loop: LoopThread,
    ) -> None:
        self.options = options
        self.adb = adb
        self.store = store
        self.clock = clock
        self.loop = loop
        self._tasks = TaskThreads("farm-fleet")
        self._sweep_pool = SweepPool("farm-sweep")
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._keys_lock = threading.Lock()
        self._summary: tuple[float | None, TrackerSummary | None] = (None, None)
        self.phones: dict[str, PhoneRuntime] = {}
        self._sweeps = 0
        self.recoverer = Recoverer(self)
        self.prober = Prober(self)
        self.held = HeldWatch(store, clock, on_free=self._phone_freed)
        self.app_watch = AppWatch(self)
        self.metrics: FarmMetrics | None = None  # farmd sets it; tests may leave it unset
        #: Called after a phone moved to ``ready`` (farmd wakes its dispatcher).
        self.on_ready: Callable[[], None] | None = None

    # -- bookkeeping ---------------------------------------------------------------

    def runtime(self, serial: str) -> PhoneRuntime:
        """The phone's in-memory state, created on first use."""
        with self._lock:
            phone = self.phones.get(serial)
            if phone is None:
                phone = PhoneRuntime(serial, phone_key(self.options.key_prefix, serial))
                self.phones[serial] = phone
            return phone

    def _own_devices(self) -> list[DeviceRecord]:
        """The phones this host runs (its own and those no host owns yet)."""
        return self.store.list_devices(host=self.options.host_id)

    def state(self, serial: str) -> DeviceState | None:
        """The phone's state in the store now (None: never seen)."""
        record = self.store.get_device(serial)
        return record.state if record else None

    def settle(self, serial: str, decide: Decide) -> tuple[DeviceRecord | None, Move | None]:
        """Apply ``decide(record)`` as a compare-and-set on the record it was given.

        The phone is read, ``decide`` names a move (or None), and the store
        moves the phone only if it is still in the state and attempt read. A
        lost race (a claim, a release, an unplug in between) is logged and the
        phone judged again on a fresh read, never overwritten.

        Returns:
            The record the last decision was made on (None: unknown phone) and
            the move applied (None: no move, or every try lost its race).
        """
        for _ in range(SETTLE_TRIES):
            record = self.store.get_device(serial)
            if record is None:
                return None, None
            move = decide(record)
            if move is None or move.to_state is record.state:
                return record, None
            if self.store.move_device(serial, move.to_state, move.reason, self.clock.now(),
                                      expect_state=record.state,
                                      expect_attempt=record.attempt_id):
                log.info("phone_state_changed", serial=serial, from_state=record.state.value,
                         to_state=move.to_state.value, reason=move.reason)
                if move.to_state is DeviceState.READY and self.on_ready is not None:
                    self.on_ready()
                return record, move
            log.info("phone_move_lost", serial=serial, read_state=record.state.value,
                     to_state=move.to_state.value, reason=move.reason)
        log.warning("phone_move_gave_up", serial=serial, tries=SETTLE_TRIES)
        return self.store.get_device(serial), None

    def set_health(self, record: DeviceRecord, health: DeviceHealth, reason: str) -> None:
        """Set the phone's health (``good``/``bad``) with its reason, if it changes."""
        if record.health is health and getattr(record, "health_reason", reason) == reason:
            return
        self.store.set_device_health(record.serial, health, reason, self.clock.now())

    def history(self, serial: str) -> list[Event]:
        """The phone's recovery history, read from its event rows (:mod:`farm.fleet.history`)."""
        return events_to_history(self.store.device_events(serial, limit=HISTORY_EVENTS))

    def record(self, serial: str, event: Event) -> None:
        """Append a recovery event to the phone's durable history."""
        self.store.add_device_event(serial, reason_of(event), event.at)

    @property
    def closing(self) -> bool:
        """Whether the manager is closing (tasks stop at their next wait)."""
        return self._closing.is_set()

    def start_task(self, label: str, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on a thread of its own, joined (bounded) at :meth:`close`."""
        self._tasks.start(label, fn)

    def submit(self, serial: str, task: Callable[[str], None]) -> bool:
        """Run ``task(serial)`` on its own thread unless a slow task runs for the phone."""
        phone = self.runtime(serial)
        with self._lock:
            if phone.busy_task or self._closing.is_set():
                return False
            phone.busy_task = True

        def run() -> None:
            try:
                task(serial)
            except _Closing:
                pass  # farmd stops: no verdict on the phone
            except Exception:  # a bug: keep the manager alive, say where
                log.exception("fleet_task_crashed", serial=serial, task=task.__name__)
            finally:
                phone.busy_task = False

        self._tasks.start(f"{task.__name__}-{serial}", run)
        return True

    # -- events -------------------------------------------------------------------------

    def on_adb_state(self, serial: str, adb_state: str) -> None:
        """A settled adb state change from :class:`farm.adb.DeviceTracker`.

        The phone becomes this host's (a new one starts discovered) unless a
        live host runs it: then this host leaves it alone (:mod:`farm.queue.hosts`).
        """
        o = self.options
        if self.store.adopt_device(serial, o.host_id, self.clock.now(),
                                   dead_after_s=o.dead_after_s) is None:
            log.info("phone_owned_elsewhere", serial=serial, adb_state=adb_state)
            return
        record, move = self.settle(serial, lambda r: lifecycle.on_adb_state(r.state, adb_state))
        if record is None:
            return
        state = move.to_state if move is not None else record.state
        if state is DeviceState.OFFLINE:
            self.app_watch.stop(serial)
            self._drop_tunnel(serial)
        elif state is DeviceState.DISCOVERED and adb_state == lifecycle.ADB_DEVICE:
            self.submit(serial, self.provision)

    def forget_connections(self, reason: str) -> None:
        """Mark every phone of this host offline, keeping quarantine.

        At farmd start nothing of an earlier run (tunnels, relays, app launched
        toward an old tracker) can be trusted. The device tracker then
        rediscovers each phone. Other hosts' phones are theirs to judge.
        """
        def decide(record: DeviceRecord) -> Move | None:
            if record.state in (DeviceState.QUARANTINED, DeviceState.OFFLINE):
                return None
            return Move(DeviceState.OFFLINE, reason)

        for device in self._own_devices():
            self.settle(device.serial, decide)

    def _drop_tunnel(self, serial: str) -> None:
        phone = self.runtime(serial)
        tunnel, phone.tunnel = phone.tunnel, None
        if tunnel is not None:
            close_usb_tunnel(self.adb, self.loop, tunnel)

    # -- provisioning -------------------------------------------------------------------

    def provision(self, serial: str) -> None:
        """discovered -> provisioning -> ready (or unhealthy, with the reason)."""
        phone = self.runtime(serial)
        _, started = self.settle(serial, lambda r: Move(DeviceState.PROVISIONING, "provisioning")
                                 if r.state is DeviceState.DISCOVERED else None)
        if started is None:
            return  # no longer discovered: someone else moved it since
        try:
            facts = read_facts(self.adb, serial)
            self.store.upsert_device(serial, self.clock.now(), facts=facts_record(facts))
            if self.options.apk is not None:
                ensure_installed(self.adb, serial, self.options.apk, self.options.clash)
            elif installed_version(self.adb, serial, PACKAGE) is None:
                raise ConfigError("apk.path", f"{PACKAGE} is not installed on {serial} and no "
                                  "APK is configured: set apk.path to the signed TVM RPC APK")
            # Asked of the phone once the app is in place: a preinstalled release
            # build refuses run-as, and only the phone knows whether su works.
            phone.method = detect_method(self.adb, serial)
            phone.blocked = None
            # Keep the screen on while plugged in (AOSP `svc power stayon`).
            self.adb.shell(serial, ["svc", "power", "stayon", "true"], timeout_s=15)
            self.launch(serial)
            if facts.opencl or facts.vulkan:
                self._record_gpu_limits(serial, facts_record(facts))
        except UserFault as exc:
            phone.blocked = str(exc)
            log.error("provisioning_blocked", serial=serial, reason=str(exc))
            self._provisioned(serial, DeviceState.UNHEALTHY, f"provisioning failed: {exc}")
            return
        except PhoneFault as exc:
            log.warning("provisioning_failed", serial=serial, reason=str(exc))
            self.record(serial, Failure(self.clock.now(), f"provisioning: {exc}"))
            self._provisioned(serial, DeviceState.UNHEALTHY, f"provisioning failed: {exc}")
            return
        self._provisioned(serial, DeviceState.READY, "app registered at the tracker")

    def _record_gpu_limits(self, serial: str, record: dict[str, object]) -> None:
        """Keep the phone's OpenCL/Vulkan limits with its facts (``facts["gpu_limits"]``).

        Read through a real RPC session once the app serves
        (:func:`farm.tvm.probe.read_gpu_limits`); the scheduler matches a GPU
        job's work-group size against them. A failed read leaves them out (the
        scheduler then assumes the 256 threads every phone GPU allows): it says
        nothing the health sweep's own probe would not.
        """
        try:
            limits = read_gpu_limits(*self.options.tracker, self.runtime(serial).key,
                                     timeout_s=self.options.probe_timeout_s, serial=serial)
        except FarmError as exc:
            log.warning("gpu_limits_unread", serial=serial, reason=str(exc))
            return
        self.store.upsert_device(serial, self.clock.now(), facts={**record, "gpu_limits": limits})
        log.info("gpu_limits_read", serial=serial, apis=sorted(limits))

    def _provisioned(self, serial: str, to_state: DeviceState, reason: str) -> None:
        """End provisioning, if the phone is still provisioning (not unplugged since)."""
        record, move = self.settle(serial, lambda r: Move(to_state, reason)
                                   if r.state is DeviceState.PROVISIONING else None)
        if record is not None and move is not None and to_state is DeviceState.UNHEALTHY:
            self.set_health(record, DeviceHealth.BAD, reason)
        if move is not None and to_state is DeviceState.READY:
            self.app_watch.ensure(serial)

    def launch(self, serial: str) -> None:
        """(Re)open tunnels, launch the app toward the tracker, wait for registration.

        Raises:
            PhoneFault: a step failed, or the app did not register in time.
        """
        phone = self.runtime(serial)
        if self.options.network == "usb-only":
            self._drop_tunnel(serial)
            phone.tunnel = open_usb_tunnel(self.adb, self.loop, serial, self.options.tracker,
                                           self.options.device_tracker_port)
        o = self.options
        target = app_target_for(o.network, o.tracker, phone.key, phone_host=o.phone_host,
                                device_tracker_port=o.device_tracker_port)
        if phone.method is None:  # relaunched before provisioning learnt it
            phone.method = detect_method(self.adb, serial)
        launch_app(self.adb, serial, target, phone.method)
        self.wait_registered(serial)

    def registered_keys(self, max_age_s: float = 0.0) -> set[str] | None:
        """Keys the tracker lists, or None if it does not answer.

        Args:
            max_age_s: an answer at most this old may be reused. Every phone
                that waits for its registration asks twice a second; sharing one
                answer keeps the tracker (one Python thread) at a couple of
                requests a second however many phones provision at once: 64
                phones asking on their own timed it out and farmd restarted it.
        """
        found = self.tracker_summary(max_age_s)
        return None if found is None else {s.key for s in found.servers}

    def tracker_summary(self, max_age_s: float = 0.0) -> TrackerSummary | None:
        """The tracker's summary, or None if it does not answer (see :meth:`registered_keys`)."""
        with self._keys_lock:
            at, found = self._summary
            if at is not None and self.clock.monotonic() - at <= max_age_s:
                return found
            try:
                found = summary(*self.options.tracker, timeout_s=5)
            except FarmError as exc:
                log.warning("tracker_summary_failed", reason=str(exc))
                found = None
            self._summary = (self.clock.monotonic(), found)
            return found

    def _phone_freed(self) -> None:
        if self.on_ready is not None:
            self.on_ready()

    def wait_registered(self, serial: str) -> None:
        """Block until the phone's key is at the tracker.

        Raises:
            PhoneFault: not within ``registration_deadline_s``.
        """
        key = self.runtime(serial).key
        deadline = self.clock.monotonic() + self.options.registration_deadline_s
        while self.clock.monotonic() < deadline:
            keys = self.registered_keys(max_age_s=REGISTRATION_POLL_S)
            if keys is not None and key in keys:
                log.info("app_registered", serial=serial, tracker_key=key)
                return
            if self._closing.wait(REGISTRATION_POLL_S):
                raise _Closing(serial)
        raise PhoneFault(serial, f"app did not register as {key!r} within "
                                 f"{self.options.registration_deadline_s:g} s")

    # -- health --------------------------------------------------------------------------

    def sweep(self) -> int:
        """Probe every watched phone in parallel and act on the verdicts; returns how many.

        Discovered phones (released from quarantine, or a provisioning that never
        started: a replug, a reboot rung) are (re)provisioned on their own
        threads; the sweep does not wait for them.
        """
        devices = self._own_devices()
        for device in devices:
            if device.state is DeviceState.DISCOVERED:
                self.submit(device.serial, self.provision)
        watched = [d.serial for d in devices
                   if d.state in lifecycle.WATCHED or d.state is DeviceState.BUSY]
        for serial in watched:
            self.app_watch.ensure(serial)  # the sweep restarts a watcher that ended
        found = self.tracker_summary()
        keys = None if found is None else {s.key for s in found.servers}
        # A phone a hand session holds is neither probed nor judged "not registered".
        held = self.held.update(devices, {d.serial: self.runtime(d.serial).key for d in devices},
                                found, lambda serial: self.runtime(serial).probing)
        self._sweeps += 1
        every = self.options.probe_every_sweeps
        probe = bool(every) and self._sweeps % every == 0
        late = self._sweep_pool.run_all(
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
        phone = self.runtime(serial)
        now = self.clock.now()
        registered = None if keys is None or held else phone.key in keys
        seen_before = phone.crashes_seen
        try:
            sample, count = read_health(
                self.adb, serial, now, crashes_seen=seen_before, registered=registered)
        except PhoneFault as exc:
            log.warning("health_probe_failed", serial=serial, reason=str(exc))
            return
        with self._lock:  # keep the crashes the app watch handled during the read
            noticed = (phone.crashes_seen or 0) - (seen_before or 0)
            phone.crashes_seen = None if count is None else count + noticed
        self.store.upsert_device(serial, now)  # last seen: this sweep
        if self.metrics is not None:
            self.metrics.observe_health(sample)
        self.store.record_health(serial, now, {
            "battery_pct": sample.battery_pct, "battery_temp_c": sample.battery_temp_c,
            "thermal_status": sample.thermal_status, "max_zone_temp_c": sample.max_zone_temp_c,
            "free_storage_mb": sample.free_storage_mb, "screen_on": sample.screen_on,
            "app_running": sample.app_running, "registered": sample.registered,
        })
        self.judge(serial, sample)
        if probe and sample.app_running and sample.registered:
            self.prober.start(serial, sample)

    def judge(self, serial: str, sample: HealthSample) -> None:
        """Move the phone as the sample's verdict says and set its health.

        Climbs the ladder if its app is down. A busy phone, or one a slow task
        owns, is left alone.
        """
        phone = self.runtime(serial)
        if phone.busy_task:
            return
        judged = verdict(sample, self.options.limits)
        cool = cool_enough(sample, self.options.limits)
        record, _ = self.settle(serial, lambda r: lifecycle.on_verdict(r.state, judged, cool=cool))
        if record is None or record.state not in lifecycle.WATCHED:
            return
        health = lifecycle.health_of(judged)
        if health is not None:
            self.set_health(record, *health)
        if app_down(sample) and phone.blocked is None:
            if not incident_open(self.history(serial), sample.at):
                self.record(serial, Failure(sample.at, "; ".join(app_failure_reasons(sample))))
            self.submit(serial, self.recoverer.recover)

    def note_crash(self, serial: str) -> None:
        """The app watch handled a ``FATAL EXCEPTION`` of the app: not news for the next sweep.

        Without it the next sweep would find one more ``FATAL EXCEPTION`` in
        logcat than it counted and restart the app the watch already restarted.
        """
        phone = self.runtime(serial)
        with self._lock:
            if phone.crashes_seen is not None:
                phone.crashes_seen += 1

    def relaunch_all(self, reason: str) -> None:
        """Relaunch the app on every ready, cooling or unhealthy phone (e.g. a new tracker)."""
        for device in self._own_devices():
            if device.state in RECOVERABLE:
                log.info("app_relaunch", serial=device.serial, reason=reason)
                self.submit(device.serial, self._relaunch)

    def _relaunch(self, serial: str) -> None:
        try:
            self.launch(serial)
        except FarmError as exc:
            reason = f"relaunch failed: {exc}"
            self.record(serial, Failure(self.clock.now(), reason))
            self.settle(serial, lambda r: Move(DeviceState.UNHEALTHY, reason)
                        if r.state in RECOVERABLE else None)

    def close(self) -> None:
        """Stop taking work, wait (bounded) for running tasks, close every tunnel."""
        self._closing.set()
        self.app_watch.close()
        self._sweep_pool.close()
        left = self._tasks.join(CLOSE_DEADLINE_S)
        if left:
            log.warning("fleet_tasks_left_running", tasks=left, deadline_s=CLOSE_DEADLINE_S)
        for serial in list(self.phones):
            self._drop_tunnel(serial)


class _Closing(Exception):
    """The manager closes: a task stops waiting and records nothing about the phone."""
