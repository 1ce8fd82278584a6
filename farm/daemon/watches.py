"""farmd's watches: the periodic checks that bring its own services back and keep its gauges.

:class:`TrackerWatch` restarts farmd's own tracker when it dies (the fleet then
serves every device again); :class:`MetricsWatch` refreshes the gauges from
the database and observes each ended attempt once. :class:`~farm.daemon.farmd.Farmd`
builds them and runs them on its scheduler; they decide nothing the pure
parts (:mod:`farm.backoff`, :mod:`farm.queue.hosts`) do not.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta

import structlog

from farm import backoff
from farm.clock import Clock
from farm.config import Settings
from farm.errors import FarmError
from farm.metrics import FarmMetrics
from farm.queue.hosts import shown_state
from farm.queue.store import Store
from farm.supervise.outage import TrackerGate

__all__ = ["METRICS_OVERLAP", "HostBeat", "MetricsWatch", "TrackerWatch", "guarded"]

log = structlog.get_logger(__name__)

#: How far back each metrics pass reads ended attempts again (see :meth:`MetricsWatch.observe`).
METRICS_OVERLAP = timedelta(minutes=5)


def guarded(fn: Callable[[], object]) -> Callable[[], None]:
    """``fn`` as a periodic job: a :class:`~farm.errors.FarmError` it raises is logged."""
    def run() -> None:
        try:
            fn()
        except FarmError as exc:
            log.warning("periodic_job_failed", job=fn.__name__, reason=str(exc))
    run.__name__ = fn.__name__
    return run


class HostBeat:
    """This host's ``hosts`` row: other hosts and ``farmctl`` see it alive.

    Stamped again every ``hosts.heartbeat_s`` (:meth:`beat`); a host silent
    for ``hosts.dead_after_s`` is dead (:mod:`farm.queue.hosts`).

    Args:
        store: the store (read when called: farmd opens it at start).
        settings: farm's settings (``host_id``, ``tracker``, ``adb``, ``metrics``).
        clock: the clock.
    """

    def __init__(self, store: Callable[[], Store], settings: Settings, clock: Clock) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock

    def register(self) -> None:
        """Upsert this host's row with its pid and ports."""
        s = self._settings
        info = {"pid": os.getpid(), "adb_port": s.adb.port,
                "metrics_port": s.metrics.port if s.metrics.enabled else None}
        self._store().register_host(s.host_id, s.tracker.advertised_host, s.tracker.port,
                                    self._clock.now(), info)

    def beat(self) -> None:
        """Stamp this host's row; register again if someone deleted it."""
        if not self._store().host_heartbeat(self._settings.host_id, self._clock.now()):
            log.warning("host_row_missing", host=self._settings.host_id)
            self.register()


class TrackerWatch:
    """Restarts a dead tracker; the fleet serves the devices again only once a new one serves.

    A restart that fails (the port is taken, say) is logged once per try
    and retried after farm's backoff with the recovery ladder's base and cap
    (``[supervise]``: the tracker is a service like a phone's app, not a
    job), so a tracker that cannot bind costs no server restarts.

    Args:
        settings: farm's settings (``tracker``, ``supervise``).
        clock: the clock (its monotonic time spaces the retries).
        serving: whether farmd's tracker runs and answers now.
        drop: end the dead tracker's process, if any.
        launch: start a new tracker (raises a :class:`~farm.errors.FarmError` when it cannot).
        restarted: tell the fleet a new tracker serves (it serves every device again).
        wake: run a dispatcher tick now.
        gate: the claim gate closed while the tracker is down or rejoined, if farmd has one.
    """

    def __init__(self, settings: Settings, clock: Clock, *, serving: Callable[[], bool],
                 drop: Callable[[], None], launch: Callable[[], None],
                 restarted: Callable[[], object], wake: Callable[[], None],
                 gate: TrackerGate | None) -> None:
        self._settings = settings
        self._clock = clock
        self._serving = serving
        self._drop = drop
        self._launch = launch
        self._restarted = restarted
        self._wake = wake
        self._gate = gate
        self._failures = 0  # restarts failed in a row
        self._retry_s = 0.0  # monotonic time of the next restart try

    def check(self) -> None:
        """Look at the tracker once; restart it if it is dead and its backoff has passed."""
        port = self._settings.tracker.port
        if self._settings.tracker.external or self._clock.monotonic() < self._retry_s:
            return
        if self._serving():
            if self._gate is not None and self._gate.waiting:
                self._wake()  # the gate opens once the new tracker lists the phones
            return
        if self._failures == 0:
            log.warning("tracker_down", tracker_port=port)
        self._drop()
        if self._gate is not None:  # closed until the relaunches below are known
            self._gate.restarting()
        try:
            self._launch()
        except FarmError as exc:
            self._failures += 1
            supervise = self._settings.supervise
            retry_in_s = backoff.backoff_s(self._failures, supervise.backoff_base_s,
                                           supervise.backoff_max_s)
            self._retry_s = self._clock.monotonic() + retry_in_s
            log.error("tracker_restart_failed", tracker_port=port, reason=str(exc),
                      retry_in_s=retry_in_s)
            return
        self._failures = 0
        log.info("tracker_restarted", tracker_port=port)
        # The stock app re-registers only after a 300 s accept timeout: the
        # fleet serves every device again (its one reconcile loop); no job is
        # claimed until the new tracker knows them (farm.supervise.outage).
        self._restarted()
        if self._gate is not None:
            self._gate.rejoining()
        self._wake()


class MetricsWatch:
    """Keeps farmd's gauges and job-duration histogram in step with the database.

    Args:
        store: the store (read when each pass runs: farmd opens it at start).
        settings: farm's settings (``hosts.dead_after_s``, ``tracker.key``).
        clock: the clock.
        metrics: the gauges and histogram.
    """

    def __init__(self, store: Callable[[], Store], settings: Settings, clock: Clock,
                 metrics: FarmMetrics) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._metrics = metrics
        # Ended attempts observed in the job-duration histogram, by end time;
        # those that ended before this farmd started are not its to observe.
        self._observed_since = clock.now()
        self._observed: dict[int, datetime] = {}

    def update(self) -> None:
        """Refresh the gauges from the database and observe newly ended attempts."""
        store, metrics, now = self._store(), self._metrics, self._clock.now()
        # Fleet-wide, from the database: every host's farmd shows the same
        # counts; a dead host's phones count as unreachable (farm.queue.hosts).
        dead = store.dead_host_ids(now, self._settings.hosts.dead_after_s)
        counts: dict[str, int] = {}
        for device in store.list_devices():
            state = shown_state(device, dead)
            counts[state] = counts.get(state, 0) + 1
        metrics.set_phone_counts(counts)
        metrics.set_reserved({r.serial for r in store.reservations(
            now=now, key_prefix=self._settings.tracker.key)})
        job_counts = store.job_counts()
        metrics.set_job_counts({state.value: n for state, n in job_counts.items()})
        self.observe()

    def observe(self) -> None:
        """Feed each newly ended attempt's duration to the histogram, once.

        An attempt's end time is stamped by whoever reported it (a child, a
        dispatcher tick, a reap), so one can be committed with an end time a
        little before one already observed: re-read the last ``METRICS_OVERLAP``
        and skip the ids seen in it.
        """
        since = self._observed_since - METRICS_OVERLAP
        for attempt in self._store().finished_attempts(since=since):
            if attempt.attempt_id not in self._observed:
                self._observed[attempt.attempt_id] = attempt.finished_at
                self._metrics.observe_job(attempt.kind, attempt.duration_s)
        if self._observed:
            self._observed_since = max(self._observed_since, *self._observed.values())
        horizon = self._observed_since - METRICS_OVERLAP
        self._observed = {i: at for i, at in self._observed.items() if at >= horizon}
