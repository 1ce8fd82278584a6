"""farmd: wires the fleet, the tracker, the queue and the periodic work together.

It makes no decisions (those are pure functions elsewhere); it starts the
long-lived pieces, runs periodic jobs on an APScheduler ``BackgroundScheduler``
and stops everything in order on SIGTERM::

    adb server ──track──> FleetManager ──provision/heal──> phones
    tracker (supervised)      │ sweep every health.interval_s, hand sessions every
                              │   health.held_interval_s (farm.fleet.held)
    Dispatcher.tick() on a wake (enqueue, child exit, phone ready) or every
        jobs.tick_interval_s: claim -> child process per attempt (farm.runner.wake)
    metrics, systemd watchdog, recurring jobs (cron), retention, regression watch,
        reservation expiry (reservations.expire_interval_s), pool key offers (pool.interval_s)

On SIGTERM farmd at once stops taking work and starting provisioning (a phone
plugged in meanwhile is left for the next farmd), lets running attempts finish
for ``jobs.stop_grace_s`` (3 s), then kills and requeues them without charging
a try (rq's warm then cold shutdown); a tune resumes from its checkpointed
records. It is gone within about 10 s.

Restarts are clean: nothing farmd starts outlives it, even after ``kill -9``
(the tracker and the virtual phones' apps end their process groups when farmd
dies, :mod:`farm.procs`; attempt children watch ``--parent-pid``). A new farmd
first ends whatever its predecessor's ``farmd.json`` still names
(:func:`farm.runner.pidfile.adopt_predecessor`), then reclaims the attempts its
predecessor on this host left running (``Store.reclaim``) without charging their
jobs a try, so they start again at once instead of after their leases.
The adb server is the one exception: ``adb start-server`` daemonizes it, and
phones stay connected through a farmd restart only if it keeps running; the new
farmd owns it again (:mod:`farm.controllers.adb_host`), so its stop ends it.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click
import structlog
from apscheduler.schedulers.background import BackgroundScheduler

from farm import backoff, logs, privacy
from farm.aio import LoopThread
from farm.api.local import ListingServer
from farm.click_types import CONTEXT_SETTINGS
from farm.clock import Clock, SystemClock
from farm.config import Settings, load_config
from farm.controllers import ANDROID, ControllerContext, controllers_for
from farm.controllers.adb_host import AdbHost
from farm.errors import FarmError
from farm.fleet.manager import FleetManager, FleetOptions
from farm.kinds.run import COMPILE_CACHE_DIR
from farm.metrics import FarmMetrics, start_metrics_server
from farm.queue.hosts import shown_state
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

METRICS_OVERLAP = timedelta(minutes=5)  # see Farmd._observe_durations
WATCH_INTERVAL_S = 5.0


class Farmd:
    """The daemon's parts and their lifecycle (``start``, ``stop``)."""

    def __init__(self, settings: Settings, *, clock: Clock | None = None,
                 virtual_phones: int = 0) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.virtual_phones = virtual_phones
        self.data_dir = Path(settings.data_dir).expanduser()
        self.scheduler = BackgroundScheduler(timezone="UTC")
        self.notifier = SystemdNotifier()
        self.metrics = FarmMetrics()
        self.stopped = threading.Event()
        self._stops: list[Callable[[], object]] = []
        self.tracker: TrackerProcess | None = None
        self.fleet: Fleet | None = None  # virtual phones, when asked for
        self.metrics_server: MetricsServer | None = None
        self.api_server: ApiServer | None = None
        self._api_socket: socket.socket | None = None  # bound at start, served by api_server
        self.tick_loop: TickLoop | None = None
        self.pool: Pool | None = None  # the pool key's offers, when pool.key is set
        self._tracker_failures = 0  # restarts failed in a row (watch_services)
        self._tracker_retry_s = 0.0  # monotonic time of the next restart try
        # No claims while farmd's own tracker is down or its phones register again.
        self.tracker_gate: TrackerGate | None = None if settings.tracker.external else TrackerGate(
            self._tracker_alive, f"{settings.tracker.host}:{settings.tracker.port}",
            # a lambda: the manager is made in start()
            unjoined=lambda: self.manager.unjoined())  # noqa: PLW0108
        # Ended attempts observed in the job-duration histogram, by end time;
        # those that ended before this farmd started are not its to observe.
        self._observed_since = self.clock.now()
        self._observed: dict[int, datetime] = {}

    # -- start -------------------------------------------------------------------

    def start(self) -> None:
        """Start every part.

        The caller runs :meth:`stop` if this raises, to end what was started.

        Raises:
            ConfigError: a schedule's spec is invalid (checked before anything starts).
            FarmdRunning: another live farmd owns the data folder.
            FarmError: a part cannot start.
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
        self._start_tracker()
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
        """Upsert this host's ``hosts`` row: other hosts and ``farmctl`` see it alive.

        Stamped again every ``hosts.heartbeat_s`` (:meth:`host_heartbeat`); a
        host silent for ``hosts.dead_after_s`` is dead (:mod:`farm.queue.hosts`).
        """
        s = self.settings
        info = {"pid": os.getpid(), "adb_port": s.adb.port,
                "metrics_port": s.metrics.port if s.metrics.enabled else None}
        self.store.register_host(s.host_id, s.tracker.advertised_host, s.tracker.port,
                                 self.clock.now(), info)

    def host_heartbeat(self) -> None:
        """Stamp this host's row; register again if someone deleted it."""
        if not self.store.host_heartbeat(self.settings.host_id, self.clock.now()):
            log.warning("host_row_missing", host=self.settings.host_id)
            self._register_host()

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
        tracker = self.tracker
        return tracker is not None and tracker.alive()

    def _launch_tracker(self) -> None:
        """Start farmd's tracker and note it in ``farmd.json``; raises TrackerUnreachable."""
        self.tracker = TrackerProcess.start(*self.tracker_addr,
                                            log_path=self.data_dir / "tracker.log")
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

    @staticmethod
    def _guarded(fn: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except FarmError as exc:
                log.warning("periodic_job_failed", job=fn.__name__, reason=str(exc))
        run.__name__ = fn.__name__
        return run

    # -- periodic work ------------------------------------------------------------

    def watch_services(self) -> None:
        """Restart a dead adb server or tracker, then bring every phone back."""
        self.adb_host.restart_if_down()
        self._reconnect_tcp_phones()
        self._watch_tracker()

    def _watch_tracker(self) -> None:
        """Restart a dead tracker; the fleet serves the devices again only once a new one serves.

        A restart that fails (the port is taken, say) is logged once per try
        and retried after farm's backoff with the recovery ladder's base and cap
        (``[supervise]``: the tracker is a service like a phone's app, not a
        job), so a tracker that cannot bind costs no server restarts.
        """
        if self.settings.tracker.external or self.clock.monotonic() < self._tracker_retry_s:
            return
        if self.tracker is not None and self.tracker.alive() and ping(*self.tracker_addr):
            if self.tracker_gate is not None and self.tracker_gate.waiting:
                self.wake_dispatcher()  # the gate opens once the new tracker lists the phones
            return
        if self._tracker_failures == 0:
            log.warning("tracker_down", tracker_port=self.tracker_addr[1])
        if self.tracker is not None:
            self.tracker.stop()
            self.tracker = None
        if self.tracker_gate is not None:  # closed until the relaunches below are known
            self.tracker_gate.restarting()
        try:
            self._launch_tracker()
        except FarmError as exc:
            self._tracker_failures += 1
            supervise = self.settings.supervise
            retry_in_s = backoff.backoff_s(self._tracker_failures, supervise.backoff_base_s,
                                           supervise.backoff_max_s)
            self._tracker_retry_s = self.clock.monotonic() + retry_in_s
            log.error("tracker_restart_failed", tracker_port=self.tracker_addr[1],
                      reason=str(exc), retry_in_s=retry_in_s)
            return
        self._tracker_failures = 0
        log.info("tracker_restarted", tracker_port=self.tracker_addr[1])
        # The stock app re-registers only after a 300 s accept timeout: the
        # fleet serves every device again (its one reconcile loop); no job is
        # claimed until the new tracker knows them (farm.supervise.outage).
        self.manager.tracker_restarted()
        if self.tracker_gate is not None:
            self.tracker_gate.rejoining()
        self.wake_dispatcher()

    def _reconnect_tcp_phones(self) -> None:
        wanted = list(self.settings.adb.connect)
        if self.fleet is not None:
            wanted += self.fleet.serials
        self.adb_host.connect_missing(wanted)

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
        # Fleet-wide, from the database: every host's farmd shows the same
        # counts; a dead host's phones count as unreachable (farm.queue.hosts).
        dead = self.store.dead_host_ids(self.clock.now(), self.settings.hosts.dead_after_s)
        counts: dict[str, int] = {}
        for device in self.store.list_devices():
            state = shown_state(device, dead)
            counts[state] = counts.get(state, 0) + 1
        self.metrics.set_phone_counts(counts)
        self.metrics.set_reserved({r.serial for r in self.store.reservations(
            now=self.clock.now(), key_prefix=self.settings.tracker.key)})
        job_counts = self.store.job_counts()
        self.metrics.set_job_counts({state.value: n for state, n in job_counts.items()})
        self._observe_durations()

    def _observe_durations(self) -> None:
        """Feed each newly ended attempt's duration to the histogram, once.

        An attempt's end time is stamped by whoever reported it (a child, a
        dispatcher tick, a reap), so one can be committed with an end time a
        little before one already observed: re-read the last ``METRICS_OVERLAP``
        and skip the ids seen in it.
        """
        for attempt in self.store.finished_attempts(since=self._observed_since - METRICS_OVERLAP):
            if attempt.attempt_id not in self._observed:
                self._observed[attempt.attempt_id] = attempt.finished_at
                self.metrics.observe_job(attempt.kind, attempt.duration_s)
        if self._observed:
            self._observed_since = max(self._observed_since, *self._observed.values())
        horizon = self._observed_since - METRICS_OVERLAP
        self._observed = {i: at for i, at in self._observed.items() if at >= horizon}

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


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML settings file (default: $FARM_CONFIG, then /etc/farm/farm.toml).")
@click.option("--virtual-phones", type=click.IntRange(min=0), default=None,
              help="Also start N virtual phones (a demo fleet).")
@click.option("--same-model", is_flag=True, default=None,
              help="Make every virtual phone one model (tune --phones 2 needs two of one model; "
                   "by default they cycle through four models). Default: virtual.same_model.")
@click.option("--json-logs/--console-logs", default=None,
              help="Log format (default: JSON off a TTY).")
def main(config_path: Path | None, virtual_phones: int | None, same_model: bool | None,
         json_logs: bool | None) -> None:
    """farmd: keep a fleet of Android phones ready for TVM benchmarks and tuning."""
    privacy.restrict_umask()  # its files, and its children's, are its user's only
    try:
        settings = load_config(config_path)
    except FarmError as exc:
        raise click.ClickException(str(exc)) from exc
    logs.configure(json=json_logs, level=settings.log_level)
    if same_model:
        settings = settings.model_copy(update={
            "virtual": settings.virtual.model_copy(update={"same_model": True})})
    count = settings.virtual.count if virtual_phones is None else virtual_phones
    daemon = Farmd(settings, virtual_phones=count)
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    try:
        daemon.start()
    except FarmError as exc:
        daemon.stop()
        raise click.ClickException(str(exc)) from exc
    except BaseException:
        daemon.stop()  # a bug, but what started must still end
        raise
    done.wait()
    daemon.stop()
    # Everything farmd owns is stopped and its database closed. What is left are
    # worker threads of APScheduler's pool, which the interpreter joins at exit:
    # a health sweep in flight kept a stopped farmd alive for seconds more.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
