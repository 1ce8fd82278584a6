"""The fleet manager: acts on device events and health sweeps, one device at a time.

Decisions are pure and live elsewhere: lifecycle moves and health in
:mod:`farm.fleet.lifecycle`, conditions in :mod:`farm.health.verdict`, recovery
in :mod:`farm.supervise.ladder`. This module gathers observations, asks those
functions, and applies the answers through each device's controller
(:mod:`farm.controllers`: phones over adb, boards, GPU hosts) and the store.
It imports no adb: phones are :class:`~farm.controllers.android.AndroidController`'s,
and any other registered kind passed in ``controllers`` is handled alike. What
only some kinds can do is asked as a capability
(:mod:`farm.controllers.capabilities`), never by the kind's name.

Devices of a tracked kind (phones: adb's device tracker,
:meth:`FleetManager.on_adb_state`) report their transport states; devices of
other kinds are discovered by each sweep asking their controller
(:meth:`FleetManager.discover`).

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
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from farm.clock import Clock
from farm.controllers import ANDROID, DeviceController
from farm.controllers.android import AndroidController
from farm.controllers.capabilities import Detachable, TrackedKind
from farm.controllers.options import FleetOptions
from farm.controllers.phone import PhoneRuntime
from farm.errors import FarmError, PhoneFault, UserFault
from farm.fleet import lifecycle
from farm.fleet.app_watch import AppWatch
from farm.fleet.held import HeldWatch, session_peer
from farm.fleet.history import HISTORY_EVENTS, events_to_history, reason_of
from farm.fleet.lifecycle import Move
from farm.fleet.probing import Prober
from farm.fleet.recovery import Recoverer, healable
from farm.fleet.serving import SERVED, Serving
from farm.fleet.workers import SweepPool, TaskThreads
from farm.health.sample import HealthSample
from farm.health.verdict import app_down, app_failure_reasons, cool_enough, verdict
from farm.metrics import FarmMetrics
from farm.queue.models import DeviceHealth, DeviceState
from farm.queue.records import DeviceRecord
from farm.queue.store import Store
from farm.supervise.ladder import Event, Failure, incident_open
from farm.tvm.keys import phone_key
from farm.tvm.probe import read_gpu_limits
from farm.tvm.tracker import ServerInfo, TrackerSummary, summary

__all__ = ["FleetManager", "FleetOptions"]

log = structlog.get_logger(__name__)

#: Compare-and-set tries of one decision before giving up until the next
#: observation: each lost race means another writer moved the phone just now.
SETTLE_TRIES = 3
#: How long :meth:`FleetManager.close` waits for running tasks; they stop at
#: their next wait, or when their adb call's own deadline ends. Short: farmd
#: must be gone within about 10 s of SIGTERM (issue 25), and a task left
#: behind is a daemon thread that ends with the process.
CLOSE_DEADLINE_S = 5.0
#: A sweep waits this long for its phones: each phone's adb probe has its own
#: deadline (``farm.controllers.android_health.PROBE_TIMEOUT_S``), well within it.
SWEEP_WAIT_S = 60.0
#: How often a phone waiting for its app's registration looks at the tracker.
REGISTRATION_POLL_S = 0.5

Decide = Callable[[DeviceRecord], Move | None]


class FleetManager:
    """Keeps every device provisioned, watched and healed.

    Thread-safe: ``on_adb_state`` is called from the device tracker's thread,
    ``sweep`` from the scheduler's.

    Args:
        options: the fleet's options.
        android: the phones' controller (farmd's: on the host's adb server,
            :meth:`farm.controllers.adb_host.AdbHost.android`); it keeps each
            phone's state in this manager's table from now on.
        store: the queue's store.
        clock: the clock.
        controllers: controllers of further device kinds by kind name (boards,
            GPU hosts).
    """

    def __init__(
        self, options: FleetOptions, android: AndroidController, store: Store, clock: Clock,
        *, controllers: Mapping[str, DeviceController] | None = None,
    ) -> None:
        self.options = options
        self.store = store
        self.clock = clock
        self.android = android
        android.use_runtime(self.runtime)
        self.controllers: dict[str, DeviceController] = {android.kind: android,
                                                         **(controllers or {})}
        self._tasks = TaskThreads("farm-fleet")
        self._sweep_pool = SweepPool("farm-sweep")
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._keys_lock = threading.Lock()
        self._summary: tuple[float | None, TrackerSummary | None] = (None, None)
        self._last_servers: dict[str, ServerInfo] = {}  # key -> last address a tracker gave
        #: Bumped by each restart of farmd's tracker (:meth:`tracker_restarted`).
        self.tracker_generation = 0
        self.phones: dict[str, PhoneRuntime] = {}
        self._sweeps = 0
        self.recoverer = Recoverer(self)
        self.serving = Serving(self)
        self.prober = Prober(self)
        self.held = HeldWatch(store, clock, on_free=self._phone_freed)
        self.app_watch = AppWatch(self, self.recoverer.recover, self.serving.sharing)
        self.metrics: FarmMetrics | None = None  # farmd sets it; tests may leave it unset
        #: Called after a phone moved to ``ready`` (farmd wakes its dispatcher).
        self.on_ready: Callable[[], None] | None = None

    # -- bookkeeping ---------------------------------------------------------------

    @property
    def phones_lock(self) -> threading.Lock:
        """Guards :attr:`phones` (read it under this lock from another thread)."""
        return self._lock

    def runtime(self, serial: str, kind: str | None = None) -> PhoneRuntime:
        """The device's in-memory state, created on first use.

        Args:
            serial: the device.
            kind: its kind when the caller knows it (discovery); else the
                store's ``devices.kind``, ``android`` for a device not stored yet.
        """
        with self._lock:
            phone = self.phones.get(serial)
            if phone is not None:
                return phone
        if kind is None:
            record = self.store.get_device(serial)
            kind = record.kind if record is not None else ANDROID  # devices.kind's default
        controller = self.controllers.get(kind)
        # A kind this farmd does not run keeps the default key shape; it is never swept.
        key = (controller.tracker_key(serial) if controller is not None
               else phone_key(self.options.key_prefix, serial))
        with self._lock:
            return self.phones.setdefault(serial, PhoneRuntime(serial, key, kind=kind))

    def _controller_of(self, kind: str, serial: str) -> DeviceController:
        controller = self.controllers.get(kind)
        if controller is None:
            raise PhoneFault(serial, f"no controller for device kind {kind!r}; this farmd "
                                     f"runs {', '.join(self.controllers)}")
        return controller

    def controller(self, serial: str) -> DeviceController:
        """The controller of the device's kind.

        Raises:
            PhoneFault: this farmd has no controller for the device's kind.
        """
        return self._controller_of(self.runtime(serial).kind, serial)

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

    def stop_intake(self) -> None:
        """Start no provisioning or recovery from now on (farmd stops); :meth:`close` follows.

        Tasks already running stop at their next wait. farmd calls this first
        on SIGTERM, so a phone plugged in while it stops is left for the next farmd.
        """
        self._closing.set()

    def start_task(self, label: str, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on a thread of its own, joined (bounded) at :meth:`close`."""
        self._tasks.start(label, fn)

    def submit(self, serial: str, task: Callable[[str], None]) -> bool:
        """Run ``task(serial)`` on its own thread unless a slow task runs for the phone.

        Returns:
            Whether ``task`` will run.
        """
        phone = self.runtime(serial)
        with self._lock:
            if self._closing.is_set() or phone.busy_task:
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
                with self._lock:
                    phone.busy_task = False

        self._tasks.start(f"{task.__name__}-{serial}", run)
        return True

    # -- events -------------------------------------------------------------------------

    def on_adb_state(self, serial: str, adb_state: str) -> None:
        """A settled adb state change from :class:`farm.adb.DeviceTracker`."""
        self.on_device_state(serial, adb_state, self.android.kind)

    def on_device_state(self, serial: str, state_seen: str, kind: str) -> None:
        """A device's transport state changed (``device``, ``offline``, ``absent``...).

        The device becomes this host's (a new one starts discovered) unless a
        live host runs it: then this host leaves it alone (:mod:`farm.queue.hosts`).

        Args:
            serial: the device.
            state_seen: its transport state in adb's words
                (:class:`~farm.controllers.base.Discovered`).
            kind: its device kind, stored with it.
        """
        o = self.options
        if self.store.adopt_device(serial, o.host_id, self.clock.now(),
                                   dead_after_s=o.dead_after_s) is None:
            log.info("device_owned_elsewhere", serial=serial, state_seen=state_seen)
            return
        self.runtime(serial, kind)
        self.store.upsert_device(serial, self.clock.now(), kind=kind)
        record, move = self.settle(serial, lambda r: lifecycle.on_adb_state(r.state, state_seen))
        if record is None:
            return
        state = move.to_state if move is not None else record.state
        if state is DeviceState.OFFLINE:
            self.app_watch.stop(serial)
            self._detach(serial)
            # It serves nothing now: a job key left here would count it among the
            # servers its job's other devices wait for (Serving.registered).
            self.runtime(serial).key = self.serving.own_key(serial)
        elif state is DeviceState.DISCOVERED and state_seen == lifecycle.ADB_DEVICE:
            self.submit(serial, self.provision)

    def discover(self) -> None:
        """Ask every controller but a tracked kind's (adb's tracker reports phones) what it sees.

        A device whose transport state changed since the last look is handled
        like an adb event; one no longer listed is ``absent``. A controller
        whose discovery fails is logged and asked again next sweep.
        """
        for kind, controller in self.controllers.items():
            if isinstance(controller, TrackedKind):
                continue
            try:
                seen = {d.serial: d.state for d in controller.discover()}
            except FarmError as exc:
                log.warning("discovery_failed", kind=kind, reason=str(exc))
                continue
            known = [d.serial for d in self.store.list_devices() if d.kind == kind]
            for serial in [*seen, *(s for s in known if s not in seen)]:
                state_seen = seen.get(serial, "absent")
                phone = self.runtime(serial, kind)
                if phone.transport_state != state_seen:
                    phone.transport_state = state_seen
                    self.on_device_state(serial, state_seen, kind)

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

    def _detach(self, serial: str) -> None:
        """Drop farmd's own links to the device (a phone's tunnels), if its kind has any."""
        controller = self.controllers.get(self.runtime(serial).kind)
        if isinstance(controller, Detachable):
            controller.detach(serial)

    # -- provisioning -------------------------------------------------------------------

    def provision(self, serial: str) -> None:
        """discovered -> provisioning -> ready (or unhealthy, with the reason)."""
        phone = self.runtime(serial)
        _, started = self.settle(serial, lambda r: Move(DeviceState.PROVISIONING, "provisioning")
                                 if r.state is DeviceState.DISCOVERED else None)
        if started is None:
            return  # no longer discovered: someone else moved it since
        try:
            controller = self.controller(serial)
            facts = controller.facts(serial)
            self.store.upsert_device(serial, self.clock.now(), facts=facts)
            prepare = getattr(controller, "prepare", None)  # optional: one-time setup
            if prepare is not None:
                prepare(serial)
            phone.blocked = None
            self.launch(serial)
            if facts.get("has_opencl") or facts.get("has_vulkan"):
                self._record_gpu_limits(serial, facts)
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

    def _record_gpu_limits(self, serial: str, record: Mapping[str, Any]) -> None:
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
        """(Re)start the device's RPC server under its desired key and wait for its registration.

        The desired key is the one its hold asks for, else its own
        (:class:`~farm.fleet.serving.Serving`).

        Raises:
            PhoneFault: a step failed, or the server did not register in time.
        """
        record = self.store.get_device(serial)
        phone = self.runtime(serial)
        if record is not None:
            phone.key = self.serving.desired(record)
        phone.served_generation = self.tracker_generation
        self.controller(serial).serve(serial, phone.key)
        self.wait_registered(serial)

    def tracker_summary(self, max_age_s: float = 0.0,
                        quiet: bool = False) -> TrackerSummary | None:
        """The tracker's summary, or None if it does not answer.

        Args:
            max_age_s: an answer at most this old may be reused. Every phone
                that waits for its registration asks twice a second; sharing one
                answer keeps the tracker (one Python thread) at a couple of
                requests a second however many phones provision at once: 64
                phones asking on their own timed it out and farmd restarted it.
            quiet: log a failed answer at debug level (a poll every second
                would repeat the sweep's warning through a whole outage).
        """
        with self._keys_lock:
            at, found = self._summary
            if at is not None and self.clock.monotonic() - at <= max_age_s:
                return found
            try:
                found = summary(*self.options.tracker, timeout_s=5)
            except FarmError as exc:
                (log.debug if quiet else log.warning)("tracker_summary_failed", reason=str(exc))
                found = None
            else:  # kept across a tracker restart: where a session may still run
                self._last_servers.update({server.key: server for server in found.servers})
            self._summary = (self.clock.monotonic(), found)
            return found

    def _phone_freed(self) -> None:
        if self.on_ready is not None:
            self.on_ready()

    def wait_registered(self, serial: str) -> None:
        """Block until the phone's key is at the tracker, then record it as the key it serves.

        A key several devices serve (a job's) counts one server per device
        (:meth:`~farm.fleet.serving.Serving.registered`).

        Raises:
            PhoneFault: not within ``registration_deadline_s``.
        """
        phone = self.runtime(serial)
        key = phone.key
        deadline = self.clock.monotonic() + self.options.registration_deadline_s
        while self.clock.monotonic() < deadline:
            generation = self.tracker_generation  # of the tracker the summary below comes from
            found = self.tracker_summary(max_age_s=REGISTRATION_POLL_S, quiet=True)
            if self.serving.registered(serial, found):
                log.info("app_registered", serial=serial, tracker_key=key)
                phone.registered_generation = generation
                self.store.set_serving_key(serial, key)
                return
            if self._closing.wait(REGISTRATION_POLL_S):
                raise _Closing(serial)
        raise PhoneFault(serial, f"app did not register as {key!r} within "
                                 f"{self.options.registration_deadline_s:g} s")

    # -- health --------------------------------------------------------------------------

    def watch_held(self) -> set[str]:
        """Judge hand sessions between sweeps from one tracker summary; returns the held serials.

        farmd calls it every ``health.held_interval_s`` (1 s): a person's own
        session on a phone is then seen before a job is sent there, and its end
        frees the phone at once (:class:`~farm.fleet.held.HeldWatch`).
        """
        devices = [d for d in self._own_devices() if d.kind in self.controllers]
        self.serving.reconcile(devices)
        if not any(d.state is DeviceState.READY or d.held_outside is not None
                   for d in devices):
            return set()  # only a ready phone can be held: no tracker request
        found = self.tracker_summary(quiet=True)
        return self.held.update(devices, {d.serial: self.runtime(d.serial).key for d in devices},
                                found, lambda serial: self.runtime(serial).probing)

    def sweep(self) -> int:
        """Probe every watched phone in parallel and act on the verdicts; returns how many.

        Discovered phones (released from quarantine, or a provisioning that never
        started: a replug, a reboot rung) are (re)provisioned on their own
        threads; the sweep does not wait for them.
        """
        self.discover()
        # Devices of a kind this farmd has no controller for are another farmd's.
        devices = [d for d in self._own_devices() if d.kind in self.controllers]
        for device in devices:
            if device.state is DeviceState.DISCOVERED:
                self.submit(device.serial, self.provision)
        self.serving.reconcile(devices)
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
        try:
            sample = self.controller(serial).read_health(serial, now, registered=registered)
        except PhoneFault as exc:
            log.warning("health_probe_failed", serial=serial, reason=str(exc))
            return
        self.store.upsert_device(serial, now)  # last seen: this sweep
        if self.metrics is not None:
            self.metrics.observe_health(sample)
        self.store.record_health(serial, now, {
            "screen_on": sample.screen_on, "app_running": sample.app_running,
            "registered": sample.registered,
        }, sample.readings)
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
        record = self.store.get_device(serial)
        if record is not None and record.state is DeviceState.BUSY:
            # Only a hold that asks for a key is the ladder's (healable): a plain
            # attempt's session would die with a restart of its server.
            if healable(record) and app_down(sample) and phone.blocked is None:
                if not incident_open(self.history(serial), sample.at):
                    self.record(serial, Failure(sample.at,
                                                "; ".join(app_failure_reasons(sample))))
                self.submit(serial, self.recoverer.recover)
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

    def tracker_restarted(self) -> list[str]:
        """A new tracker serves: every server's registration is stale; serve them again.

        The stock app registers again only after a 300 s accept timeout, so
        each device's server must be started again toward the new tracker. The
        fleet has one owner of that, as of every other serve: this bumps
        :attr:`tracker_generation` (every device's observed state is then
        stale, ``devices.serving_key`` cleared) and :meth:`Serving.reconcile
        <farm.fleet.serving.Serving.reconcile>` serves each device again on its
        own task thread, now and at every later pass for a device whose task
        was busy (a provisioning or a recovery: it serves once that ended).
        A busy device whose client holds a session keeps it
        (:meth:`~farm.fleet.serving.Serving.serve`).

        Returns:
            The serials whose serve task started now.
        """
        with self._keys_lock:  # an answer of the dead tracker says nothing of the new one
            self.tracker_generation += 1
            self._summary = (None, None)
        devices = [d for d in self._own_devices() if d.kind in self.controllers]
        for device in devices:
            if device.serving_key is not None:
                self.store.set_serving_key(device.serial, None)
        log.info("tracker_generation", tracker_generation=self.tracker_generation,
                 devices=len(devices))
        return self.serving.reconcile(devices)

    def unjoined(self) -> int:
        """How many of this host's devices the new tracker does not know yet, or soon won't.

        Those whose server was started toward an older tracker (the fleet
        serves them next) and those whose serve toward this one runs now; a
        device whose serve failed (unhealthy, no job goes there) or that a
        person must fix (``blocked``) is not counted, so one broken phone does
        not hold the farm (:class:`farm.supervise.outage.TrackerGate`).
        """
        generation = self.tracker_generation
        left = 0
        for device in self._own_devices():
            if device.kind not in self.controllers or device.state not in SERVED:
                continue
            phone = self.runtime(device.serial)
            if phone.blocked is None and (
                    phone.served_generation < generation
                    or (phone.busy_task and phone.registered_generation < generation)):
                left += 1
        return left

    def in_session(self, serial: str) -> bool:
        """Whether a client on this host holds a session with the phone's app now.

        Read from this host's TCP table against the address the tracker last
        handed out for the phone (:func:`farm.fleet.held.session_peer`); an
        address never seen counts as no session.
        """
        server = self._last_servers.get(self.runtime(serial).key)
        return server is not None and session_peer(server) is not None

    def close(self) -> None:
        """Stop taking work, wait (bounded) for running tasks, close every tunnel."""
        self._closing.set()
        self.app_watch.close()
        self._sweep_pool.close()
        left = self._tasks.join(CLOSE_DEADLINE_S)
        if left:
            log.warning("fleet_tasks_left_running", tasks=left, deadline_s=CLOSE_DEADLINE_S)
        for serial, phone in list(self.phones.items()):
            controller = self.controllers.get(phone.kind)
            if isinstance(controller, Detachable):
                controller.detach(serial)  # the server keeps serving on the device
            elif controller is not None:  # a server farmd started ends with it
                controller.stop_server(serial)


class _Closing(Exception):
    """The manager closes: a task stops waiting and records nothing about the phone."""
