"""Farmd: wires the fleet, the tracker, the queue and the watches together, and stops them."""

from __future__ import annotations

import functools
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
from apscheduler.schedulers.background import BackgroundScheduler

from farm import composition, privacy
from farm.aio import LoopThread
from farm.api.local import ListingServer
from farm.clock import Clock, SystemClock
from farm.config import Settings
from farm.controllers import ANDROID, ControllerContext, controllers_for
from farm.controllers.adb_host import AdbHost
from farm.daemon.watches import HostBeat, MetricsWatch, TrackerWatch, guarded
from farm.errors import StopAsked
from farm.fleet.manager import FleetManager, FleetOptions
from farm.kinds.run import COMPILE_CACHE_DIR
from farm.metrics import FarmMetrics, start_metrics_server
from farm.queue.store import Store
from farm.results.watch import RegressionWatch
from farm.retention import RetentionReport, apply_retention
from farm.runner.dispatcher import Dispatcher
from farm.runner.pidfile import adopt_predecessor, record_child, remove_pidfile, write_pidfile
from farm.runner.wake import PgWake, SocketWake, TickLoop
from farm.schedules import install_schedules, validate_schedules
from farm.supervise.outage import TrackerGate
from farm.supervise.systemd import SystemdNotifier
from farm.tvm.tracker import TrackerProcess, ping

if TYPE_CHECKING:
    from farm.fleet.pool import Pool
    from farm.metrics import MetricsServer
    from farm.serve.server import ApiServer
    from farm.tvm.relay import Offer
    from farm.virtual.fleet import Fleet

log = structlog.get_logger(__name__)

WATCH_INTERVAL_S = 5.0


class Farmd:
    """The daemon's parts and their lifecycle (``start``, ``stop``)."""

    def __init__(self, settings: Settings, *, clock: Clock | None = None,
                 virtual_phones: int = 0) -> None:
        composition.install()  # kinds, controllers, readings: also for an in-process farmd
        self.settings = settings
        self.clock = clock or SystemClock()
        self.virtual_phones = virtual_phones
        self.data_dir = Path(settings.data_dir).expanduser()
        self.scheduler = BackgroundScheduler(timezone="UTC")
        self.notifier = SystemdNotifier()
        self.metrics = FarmMetrics()
        self.stopped = threading.Event()
        #: Set by :meth:`ask_stop` (a signal): a start still under way ends at its next step.
        self.stop_asked = threading.Event()
        self._stops: list[Callable[[], object]] = []
        self.tracker: TrackerProcess | None = None
        self.fleet: Fleet | None = None  # virtual phones, when asked for
        self.metrics_server: MetricsServer | None = None
        self.api_server: ApiServer | None = None
        self._api_socket: socket.socket | None = None  # bound at start, served by api_server
        self.tick_loop: TickLoop | None = None
        self.pool: Pool | None = None  # the pool key's offers, when pool.key is set
        # No claims while farmd's own tracker is down or its phones register again.
        self.tracker_gate: TrackerGate | None = None if settings.tracker.external else TrackerGate(
            self._tracker_alive, f"{settings.tracker.host}:{settings.tracker.port}",
            unjoined=lambda: self.manager.unjoined())  # noqa: PLW0108 - made in start()
        self.tracker_watch = TrackerWatch(
            settings, self.clock, serving=self._tracker_serving, drop=self._drop_tracker,
            launch=self._launch_tracker,
            restarted=lambda: self.manager.tracker_restarted(),  # noqa: PLW0108 - made in start()
            wake=self.wake_dispatcher, gate=self.tracker_gate)
        self.metrics_watch = MetricsWatch(lambda: self.store, settings, self.clock, self.metrics)
        self.host_beat = HostBeat(lambda: self.store, settings, self.clock)

    # -- start -------------------------------------------------------------------

    def start(self) -> None:
        """Start every part.

        The caller runs :meth:`stop` if this raises, to end what was started.

        Raises:
            ConfigError: a schedule's spec is invalid (checked before anything starts).
            FarmdRunning: another live farmd owns the data folder.
            FarmError: a part cannot start.
            StopAsked: :meth:`ask_stop` was called before the start was done.
        """
        s = self.settings
        validate_schedules(s.schedules)
        privacy.private_dir(self.data_dir)
        adopt_predecessor(self.data_dir)
        write_pidfile(self.data_dir, self.clock.now())
        self._stops.append(lambda: remove_pidfile(self.data_dir))
        self.store = Store(s.database_url, auto_migrate=s.database.auto_migrate)
        self._stops.append(self.store.close)
        self._start_listing()
        if s.api.enabled:  # bound now, served last: its port is not taken meanwhile
            from farm.serve.server import listen

            self._api_socket = listen(s.api.host, s.api.port)
            self._stops.append(self._api_socket.close)
        if s.metrics.enabled:  # early too, for the same reason; its collectors only read
            self.metrics_server = start_metrics_server(self.metrics, s.metrics.host,
                                                       s.metrics.port)
            self._stops.append(self.metrics_server.stop)
        self._register_host()
        self._reclaim()
        # A server a killed farmd of this data folder started is ours again.
        self.adb_host = AdbHost.from_settings(s, data_dir=self.data_dir)
        self.adb_host.start()
        self._stops.append(self.adb_host.stop)
        self._go_on()
        self._start_tracker()
        self._go_on()
        self.loop = LoopThread()
        self._stops.append(self.loop.close)
        # Phones get this host's adb client; every other registered kind is built from settings.
        others = controllers_for(ControllerContext(s, {"loop": self.loop}), skip=(ANDROID,))
        options = self._fleet_options()
        self.manager = FleetManager(options, self.adb_host.android(options, self.loop),
                                    self.store, self.clock, controllers=others)
        self.manager.metrics = self.metrics
        if s.jobs.wake_on_events:
            self.manager.on_ready = self.wake_dispatcher
        self._stops.append(self.manager.close)
        self.manager.forget_connections("farmd started: provisioning again")
        self.adb_host.track(self.manager.on_adb_state)
        self._stops.append(self.adb_host.stop_tracking)
        if self.virtual_phones:
            self._start_virtual_phones(self.virtual_phones)
            self._go_on()
        self.dispatcher = Dispatcher(
            self.store, s, self.clock,
            on_exit=self.wake_dispatcher if s.jobs.wake_on_events else None,
            gate=self.claim_gate)
        self._stops.append(self._drain)
        self._schedule()
        if s.api.enabled:  # last started, so the first stopped: no request meets a closed part
            self._start_api()
        self.notifier.ready("farmd ready")
        log.info("farmd_started", host=s.host_id, data_dir=str(self.data_dir),
                 adb_port=s.adb.port, tracker_port=self.tracker_addr[1], network=s.tracker.network)

    def ask_stop(self) -> None:
        """Ask farmd to stop (its signal handler's call; safe from any thread).

        A start under way ends at its next step, or at once while it waits for
        its tracker, raising :class:`~farm.errors.StopAsked`; the caller then
        runs :meth:`stop`, as after any start. Without this, a SIGTERM during
        start waited for the whole start: up to the tracker's 30 s.
        """
        self.stop_asked.set()

    def _go_on(self) -> None:
        """Raise StopAsked if :meth:`ask_stop` was called: start no further part."""
        if self.stop_asked.is_set():
            raise StopAsked("asked to stop while farmd started")

    def claim_gate(self) -> str | None:
        """Why the dispatcher may claim nothing now, or None.

        Farmd's tracker down or being rejoined (:class:`TrackerGate`), or a
        ready device between keys: handed back while its server still serves a
        tuning job's key (:meth:`farm.fleet.serving.Serving.between_keys`).
        """
        if self.tracker_gate is not None and (reason := self.tracker_gate()) is not None:
            return reason
        devices = self.store.list_devices(host=self.manager.options.host_id)
        if moving := self.manager.serving.between_keys(devices):
            return (f"{len(moving)} device(s) handed back, not yet serving their own "
                    f"tracker key: {', '.join(moving)}")
        return None

    @property
    def tracker_addr(self) -> tuple[str, int]:
        """The tracker's ``(host, port)`` from the settings."""
        return (self.settings.tracker.host, self.settings.tracker.port)

    def _register_host(self) -> None:
        """Upsert this host's ``hosts`` row (:meth:`farm.daemon.watches.HostBeat.register`)."""
        self.host_beat.register()

    def host_heartbeat(self) -> None:
        """Stamp this host's row; register again if someone deleted it."""
        self.host_beat.beat()

    def _reclaim(self) -> None:
        """Requeue at once the attempts this host's previous farmd left running.

        That farmd is dead (:func:`adopt_predecessor` refused to start
        otherwise) and its attempt children end with it, so waiting for their
        leases would only idle the phones; its death costs the jobs no try.
        """
        reclaimed = self.store.reclaim(self.settings.host_id, "farmd restarted",
                                       self.clock.now())
        if reclaimed:
            log.info("attempts_reclaimed", host=self.settings.host_id,
                     attempts=[a.id for a in reclaimed])

    def _start_tracker(self) -> None:
        if self.settings.tracker.external:
            return
        self._stops.append(lambda: self.tracker and self.tracker.stop())
        self._launch_tracker()

    def _tracker_alive(self) -> bool:
        return self.tracker is not None and self.tracker.alive()

    def _tracker_serving(self) -> bool:
        return self._tracker_alive() and ping(*self.tracker_addr)

    def _launch_tracker(self) -> None:
        """Start farmd's tracker and note it in ``farmd.json``.

        Raises:
            TrackerUnreachable: it did not answer in time.
            StopAsked: farmd was asked to stop meanwhile.
        """
        self.tracker = TrackerProcess.start(*self.tracker_addr,
                                            log_path=self.data_dir / "tracker.log",
                                            stop_asked=self.stop_asked)
        record_child(self.data_dir, "tracker", self.tracker.pid)

    def _fleet_options(self) -> FleetOptions:
        apk = self.settings.apk.path
        if apk is None and self.virtual_phones:
            from farm.provision.standin import demo_apk

            apk = demo_apk(self.data_dir)
        return FleetOptions.from_settings(self.settings, apk=apk)

    def _start_virtual_phones(self, count: int) -> None:
        # Demo only: the phones attach to the adb server like USB phones; nothing
        # above farm/adb learns they are virtual.
        from farm.virtual.cli import start_control
        from farm.virtual.fleet import Fleet

        phones_dir = self.data_dir / "phones"
        self.fleet = Fleet(count, network=self.settings.virtual.network,
                           adb_port=self.settings.adb.port, data_dir=phones_dir,
                           same_model=self.settings.virtual.same_model)
        self.fleet.start()
        self._stops.append(self.fleet.stop)
        # farm-phones fault SERIAL ... reaches these phones too (<data_dir>/phones/control.json).
        self._stops.append(start_control(self.fleet, phones_dir))

    def _schedule(self) -> None:
        s, add = self.settings, self.scheduler.add_job
        common = {"coalesce": True, "max_instances": 1}
        add(self._guarded(self.manager.sweep), "interval", seconds=s.health.interval_s,
            id="health_sweep", **common)
        add(self._guarded(self.manager.watch_held), "interval",
            seconds=s.health.held_interval_s, id="held_watch", **common)
        add(self._guarded(self.host_heartbeat), "interval", seconds=s.hosts.heartbeat_s,
            id="host_heartbeat", **common)
        add(self._guarded(self.watch_services), "interval", seconds=WATCH_INTERVAL_S,
            id="watch_services", **common)
        add(self._guarded(self.update_metrics), "interval", seconds=15, id="metrics", **common)
        add(self._guarded(self.expire_reservations), "interval",
            seconds=s.reservations.expire_interval_s, id="reservations", **common)
        add(self._guarded(self.apply_retention), "interval", seconds=s.retention.interval_s,
            id="retention", **common)
        self.regression_watch = RegressionWatch(self.store, s, self.clock, self.metrics)
        add(self._guarded(self.regression_watch.check), "interval",
            seconds=s.results.watch_interval_s, id="regression_watch", **common)
        interval_s = self.notifier.watchdog_interval_s()
        if interval_s:
            add(self.notifier.watchdog, "interval", seconds=interval_s, id="watchdog", **common)
        if s.pool.key is not None or s.pool.keys:
            self._start_pool()
            add(self._guarded(self.sync_pool), "interval", seconds=s.pool.interval_s,
                id="pool", **common)
        install_schedules(self.scheduler, s.schedules, self.store, self.clock)
        self.scheduler.start()
        self._stops.append(lambda: self.scheduler.shutdown(wait=False))
        self._start_dispatching()

    def _start_pool(self) -> None:
        """Offer idle usb-only phones under the shared pool keys (:mod:`farm.fleet.pool`)."""
        from farm.fleet.pool import Pool, pool_keys

        def offers() -> dict[str, Offer]:
            return {serial: phone.tunnel.relay.offer
                    for serial, phone in list(self.manager.phones.items())
                    if phone.tunnel is not None and phone.tunnel.relay.offer is not None}

        self.pool = Pool(pool_keys(self.settings.pool), self.tracker_addr, self.store,
                         self.clock, self.loop, offers, on_free=self.wake_dispatcher)
        self.manager.held.pooled = self.pool.in_session
        self._stops.append(self.pool.close)

    def sync_pool(self) -> None:
        """Offer newly idle phones under the pool key and withdraw busy ones."""
        if self.pool is not None:
            self.metrics.pool_phones.set(len(self.pool.sync()))

    def _start_listing(self) -> None:
        """Answer ``farmctl jobs`` and ``devices`` on the data folder's socket (farm.api.local)."""
        try:
            listing = ListingServer(self.data_dir, self.store, self.settings, self.clock)
        except OSError as exc:  # farmctl reads the database itself, only slower
            log.warning("listing_socket_unavailable", path=str(self.data_dir), reason=str(exc))
        else:
            self._stops.append(listing.close)

    def _start_dispatching(self) -> None:
        """Tick the dispatcher on its own thread, and listen for wakes if configured.

        Stopped before the drain (``_stops`` runs in reverse), so the drain's
        ticks never run beside the loop's.
        """
        s = self.settings
        self.tick_loop = TickLoop(self._guarded(self.dispatcher.tick), s.jobs.tick_interval_s)
        self.tick_loop.start()
        self._stops.append(self.tick_loop.stop)
        if not s.jobs.wake_on_events:
            return
        try:
            socket_wake = SocketWake(self.data_dir, self.wake_dispatcher)
        except OSError as exc:  # the tick still finds every job
            log.warning("wake_socket_unavailable", path=str(self.data_dir), reason=str(exc))
        else:
            self._stops.append(socket_wake.close)
        if self.store.url.startswith("postgresql"):
            pg_wake = PgWake(self.store.url, self.wake_dispatcher,
                             backoff_base_s=s.supervise.backoff_base_s,
                             backoff_max_s=s.supervise.backoff_max_s)
            self._stops.append(pg_wake.close)

    def _start_api(self) -> None:
        from farm.api.context import ApiContext  # FastAPI and uvicorn load only when served
        from farm.serve.server import ApiServer

        s = self.settings
        self.api_server = ApiServer(
            ApiContext(self.store, s, self.clock, wake=self.wake_dispatcher), s.api.host,
            s.api.port, sock=self._api_socket)
        self.api_server.start()
        self._stops.append(self.api_server.stop)

    def wake_dispatcher(self) -> None:
        """Run a dispatcher tick now (coalesced with one running or asked for)."""
        if self.tick_loop is not None:
            self.tick_loop.wake()

    _guarded = staticmethod(guarded)

    # -- periodic work ------------------------------------------------------------

    def watch_services(self) -> None:
        """Restart a dead adb server or tracker, then bring every phone back."""
        self.adb_host.restart_if_down()
        virtual = self.fleet.serials if self.fleet is not None else []
        self.adb_host.connect_missing([*self.settings.adb.connect, *virtual])  # TCP phones
        self._watch_tracker()

    def apply_retention(self) -> RetentionReport:
        """Thin old health samples, prune run folders and the compile cache (farm.retention)."""
        running = {f"attempt-{attempt_id}" for attempt_id in list(self.dispatcher.children)}
        return apply_retention(
            self.store, self.settings.retention, self.clock.now(),
            runs_dir=self.dispatcher.runs_dir,
            cache_root=self.data_dir / COMPILE_CACHE_DIR,
            keep_runs=running,
        )  # fmt: skip

    def expire_reservations(self) -> None:
        """End reservations past their end time; wake the dispatcher if a phone came free."""
        ended = self.store.expire_reservations(self.clock.now(),
                                               key_prefix=self.settings.tracker.key)
        if ended:
            self.wake_dispatcher()

    def update_metrics(self) -> None:
        """Refresh the gauges from the database and observe newly ended attempts."""
        self.metrics_watch.update()

    def _watch_tracker(self) -> None:
        """Restart a dead tracker (:class:`~farm.daemon.watches.TrackerWatch`)."""
        self.tracker_watch.check()

    def _drop_tracker(self) -> None:
        if self.tracker is not None:
            self.tracker.stop()
            self.tracker = None

    # -- stop ------------------------------------------------------------------------

    def _drain(self) -> None:
        self.dispatcher.stop(self.settings.jobs.stop_grace_s)
        self.dispatcher.close()

    def _stop_intake(self) -> None:
        """What stops at once on SIGTERM: adb tracking and new provisioning or recovery."""
        adb_host = getattr(self, "adb_host", None)
        if adb_host is not None:
            adb_host.stop_tracking()
        manager = getattr(self, "manager", None)
        if manager is not None:
            manager.stop_intake()

    def stop(self) -> None:
        """Stop taking work, drain, then stop every part in reverse order."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        log.info("farmd_stopping")
        # Telling systemd can fail (InfraFault) like any step: it must not keep the rest running.
        steps: list[Callable[[], object]] = [
            functools.partial(self.notifier.stopping, "farmd stopping"), self._stop_intake,
            *reversed(self._stops)]
        for stop in steps:
            try:
                stop()
            except Exception:  # keep stopping the rest; say what failed
                log.exception("farmd_stop_step_failed", step=getattr(stop, "__name__", repr(stop)))
        log.info("farmd_stopped")
