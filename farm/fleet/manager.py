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

import threading
from collections.abc import Callable, Mapping

import structlog

from farm.clock import Clock
from farm.controllers import ANDROID, DeviceController
from farm.controllers.android import AndroidController
from farm.controllers.capabilities import Detachable
from farm.controllers.options import FleetOptions
from farm.controllers.phone import PhoneRuntime
from farm.errors import PhoneFault
from farm.fleet.app_watch import AppWatch
from farm.fleet.discovery import Discovery
from farm.fleet.held import HeldWatch
from farm.fleet.history import HISTORY_EVENTS, events_to_history, reason_of
from farm.fleet.lifecycle import Move
from farm.fleet.ports import Decide
from farm.fleet.probing import Prober
from farm.fleet.provisioning import Provisioner
from farm.fleet.recovery import Recoverer
from farm.fleet.serving import Serving
from farm.fleet.sweeping import Sweeper
from farm.fleet.tracker_look import TrackerLook
from farm.fleet.workers import Closing, TaskThreads
from farm.health.sample import HealthSample
from farm.metrics import FarmMetrics
from farm.queue.models import DeviceHealth, DeviceState
from farm.queue.records import DeviceRecord
from farm.queue.store import Store
from farm.supervise.ladder import Event
from farm.tvm.keys import phone_key
from farm.tvm.tracker import TrackerSummary

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
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.tracker_look = TrackerLook(options.tracker, clock)
        self.phones: dict[str, PhoneRuntime] = {}
        self.recoverer = Recoverer(self)
        self.serving = Serving(self, self.recoverer.recover)
        self.prober = Prober(self)
        self.held = HeldWatch(store, clock, on_free=self._phone_freed)
        self.app_watch = AppWatch(self, self.recoverer.recover, self.serving.sharing)
        self.provisioner = Provisioner(self, self.serving, self.app_watch.ensure)
        self.discovery = Discovery(self, self.provisioner.provision, self.app_watch.stop,
                                   self.serving.own_key)
        self.sweeper = Sweeper(self, self.serving, self.held, self.prober, self.app_watch.ensure,
                               self.provisioner.provision, self.recoverer.recover)
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

    def own_devices(self) -> list[DeviceRecord]:
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
            except Closing:
                pass  # farmd stops: no verdict on the phone
            except Exception:  # a bug: keep the manager alive, say where
                log.exception("fleet_task_crashed", serial=serial, task=task.__name__)
            finally:
                with self._lock:
                    phone.busy_task = False

        self._tasks.start(f"{task.__name__}-{serial}", run)
        return True

    # -- transport events (farm.fleet.discovery) ---------------------------------------

    def on_adb_state(self, serial: str, adb_state: str) -> None:
        """A settled adb state change from adb's tracker (:mod:`farm.controllers.adb_host`)."""
        self.discovery.on_device_state(serial, adb_state, self.android.kind)

    def on_device_state(self, serial: str, state_seen: str, kind: str) -> None:
        """A device's transport state changed (``device``, ``offline``, ``absent``...)."""
        self.discovery.on_device_state(serial, state_seen, kind)

    def discover(self) -> None:
        """Ask every untracked kind's controller what it sees (each sweep does)."""
        self.discovery.discover()

    def forget_connections(self, reason: str) -> None:
        """Mark every device of this host offline, keeping quarantine (farmd's start)."""
        self.discovery.forget_connections(reason)

    # -- provisioning and serving (farm.fleet.provisioning) -----------------------------

    def provision(self, serial: str) -> None:
        """discovered -> provisioning -> ready (or unhealthy, with the reason)."""
        self.provisioner.provision(serial)

    def launch(self, serial: str) -> None:
        """(Re)start the device's server under its desired key and wait for its registration.

        Raises:
            PhoneFault: a step failed, or the server did not register in time.
        """
        self.provisioner.launch(serial)

    def wait_registered(self, serial: str) -> None:
        """Block until the device's key is at the tracker, then record it as the key it serves.

        Raises:
            PhoneFault: not within ``registration_deadline_s``.
        """
        self.provisioner.wait_registered(serial)

    def wait_closing(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s``; True as soon as the manager closes."""
        return self._closing.wait(timeout_s)

    def tracker_summary(self, max_age_s: float = 0.0,
                        quiet: bool = False) -> TrackerSummary | None:
        """The tracker's summary (one shared answer at most ``max_age_s`` old), or None."""
        return self.tracker_look.summary(max_age_s, quiet)

    @property
    def tracker_generation(self) -> int:
        """Bumped by each restart of farmd's tracker (:meth:`tracker_restarted`)."""
        return self.tracker_look.generation

    @tracker_generation.setter
    def tracker_generation(self, generation: int) -> None:
        self.tracker_look.generation = generation

    def _phone_freed(self) -> None:
        if self.on_ready is not None:
            self.on_ready()

    # -- health (farm.fleet.sweeping) --------------------------------------------------

    def watch_held(self) -> set[str]:
        """Judge hand sessions between sweeps; returns the held serials (farmd: every 1 s)."""
        return self.sweeper.watch_held()

    def sweep(self) -> int:
        """Read and judge every watched device in parallel; returns how many."""
        return self.sweeper.sweep()

    def judge(self, serial: str, sample: HealthSample) -> None:
        """Move the device as the sample's verdict says, set its health, heal a dead server."""
        self.sweeper.judge(serial, sample)

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
        self.tracker_look.restarted()
        devices = [d for d in self.own_devices() if d.kind in self.controllers]
        for device in devices:
            if device.serving_key is not None:
                self.store.set_serving_key(device.serial, None)
        log.info("tracker_generation", tracker_generation=self.tracker_generation,
                 devices=len(devices))
        return self.serving.reconcile(devices)

    def unjoined(self) -> int:
        """How many devices the new tracker does not know yet (``Serving.unjoined``)."""
        return self.serving.unjoined()

    def in_session(self, serial: str) -> bool:
        """Whether a client on this host holds a session with the device's server now."""
        return self.tracker_look.in_session(self.runtime(serial).key)

    def close(self) -> None:
        """Stop taking work, wait (bounded) for running tasks, close every tunnel."""
        self._closing.set()
        self.app_watch.close()
        self.sweeper.close()
        left = self._tasks.join(CLOSE_DEADLINE_S)
        if left:
            log.warning("fleet_tasks_left_running", tasks=left, deadline_s=CLOSE_DEADLINE_S)
        for serial, phone in list(self.phones.items()):
            controller = self.controllers.get(phone.kind)
            if isinstance(controller, Detachable):
                controller.detach(serial)  # the server keeps serving on the device
            elif controller is not None:  # a server farmd started ends with it
                controller.stop_server(serial)
