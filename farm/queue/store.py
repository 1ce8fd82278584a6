"""The durable queue: jobs, attempts under leases, results exactly once.

Every method is one transaction and takes the time as ``now`` (aware UTC); none
reads a clock, so tests jump ahead instead of sleeping (rq's
``registry.cleanup(timestamp)`` works the same way). The life of a job::

    enqueue ──> queued ──claim──> running ──finish──> succeeded (one Result)
                  ^                  │ fail_attempt / reap (lease expired)
                  └──── retry ───────┤
                                     └──> failed        cancel: queued|running -> cancelled

Claims are atomic: rows are locked (``FOR UPDATE SKIP LOCKED`` on PostgreSQL;
SQLite's single writer under ``BEGIN IMMEDIATE``) and re-checked before they
change, so two farmd hosts sharing one PostgreSQL queue cannot start one job
twice or put two jobs on one phone. Device operations live in
:mod:`farm.queue.devices`; the retry policy in :mod:`farm.queue.lifecycle`.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Self

from sqlalchemy import ColumnElement, func, or_, select, text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from farm import logs
from farm.errors import FarmError, StoreError
from farm.queue import endings, head, lifecycle, transitions
from farm.queue.blobs import BlobOps
from farm.queue.db import JOBS_CHANNEL, create_engine, migrate, require_head
from farm.queue.devices import DeviceOps, of_host
from farm.queue.helpers import HelperOps
from farm.queue.hosts import HostOps
from farm.queue.models import (
    Attempt,
    Device,
    DeviceSnapshot,
    Job,
    JobState,
    Result,
    Sample,
    TuningRecord,
)
from farm.queue.records import (
    AttemptView,
    Claim,
    Decision,
    Failure,
    FinishedAttempt,
    JobView,
    Outcome,
    ResultView,
    SnapshotData,
    TuningData,
)
from farm.queue.regressions import RegressionOps
from farm.queue.reservations import ReservationOps, active_reservations
from farm.queue.scheduler import AGING_STEP_S, Assignment, DeviceView, QueueSnapshot
from farm.queue.spec import JobSpec, parse_spec
from farm.queue.task_work import TaskWorkOps
from farm.queue.tokens import TokenOps
from farm.queue.tuning import TuningRecordOps

__all__ = ["Store"]

log = logs.get_logger(__name__)


class Store(DeviceOps, HostOps, BlobOps, ReservationOps, RegressionOps, TokenOps,
            TuningRecordOps, TaskWorkOps, HelperOps):
    """The queue database; migrated to the newest schema when opened.

    Args:
        url: a SQLAlchemy URL, e.g. ``farm.queue.db.default_url(data_dir)``
            (SQLite) or ``postgresql+psycopg://user@host/farm``.
        auto_migrate: migrate when opened (:func:`farm.queue.db.migrate`, once
            across concurrent openers); False only checks that the schema is at
            the newest revision (``[database] auto_migrate``; ``farmctl db
            upgrade`` migrates).

    Every method is one transaction, and every method raises
    :class:`~farm.errors.StoreError` when the database refuses it (locked past
    the busy timeout, connection lost); SQLAlchemy's own errors never escape.
    Methods that change a row log one line per change after the commit.

    Raises:
        StoreError: the database cannot be opened or migrated; with
            ``auto_migrate`` off, its schema is not the newest.
    """

    def __init__(self, url: str, *, auto_migrate: bool = True) -> None:
        self.url = url
        self._engine = create_engine(url)
        try:
            (migrate if auto_migrate else require_head)(self._engine)
        except StoreError:
            self._engine.dispose()
            raise
        self._sessions = sessionmaker(self._engine, expire_on_commit=False)
        self._specs = head.DecodedSpecs()

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        """One transaction; SQLAlchemy errors become StoreError at this boundary."""
        try:
            with self._sessions() as session:
                with session.begin():
                    yield session
                for event, fields in transitions.noted(session):
                    log.info(event, **fields)
        except IntegrityError:
            raise  # callers decide: a unique constraint is how "exactly once" is kept
        except SQLAlchemyError as exc:
            raise StoreError(f"database error: {exc}") from exc

    def _notify_jobs(self, session: Session) -> None:
        """On PostgreSQL, ``NOTIFY farm_jobs`` at this transaction's commit.

        Delivered to every listening farmd (a job to start, phones freed) and
        ``farmctl wait`` (a job may have ended), on any host (farm.runner.wake);
        a rolled-back transaction sends nothing (PostgreSQL docs, "NOTIFY").
        """
        if self._engine.dialect.name == "postgresql":
            session.execute(text(f"NOTIFY {JOBS_CHANNEL}"))

    # --- jobs -------------------------------------------------------------------

    def enqueue(self, spec: JobSpec | Mapping[str, Any], now: datetime, *,
                owner: str | None = None) -> int:
        """Store a job; it is durable once this returns.

        On PostgreSQL the transaction also sends ``NOTIFY farm_jobs``, which
        wakes every listening farmd's dispatcher at commit.

        Args:
            spec: a validated spec, or raw data to validate.
            now: the submit time.
            owner: the API token's owner enqueuing it (``jobs.owner``); None from the local CLI.

        Returns:
            The job id.

        Raises:
            SpecError: raw data failed validation.
            StoreError: the database refused the write.
        """
        job = _new_job(spec, now, owner=owner)
        with self._tx() as session:
            session.add(job)
            session.flush()
            self._notify_jobs(session)
            return job.id

    def enqueue_run(
        self, specs: Sequence[JobSpec | Mapping[str, Any]], now: datetime, *,
        owner: str | None = None,
    ) -> tuple[str, list[int]]:
        """Store the jobs of one fan-out (``enqueue --each``) under a new run id, all or none.

        ``owner`` is as for :meth:`enqueue`.

        Returns:
            The run id (``r-`` and 12 hex digits) and the job ids, in the order of ``specs``.

        Raises:
            SpecError: raw data failed validation (nothing is stored).
            StoreError: the database refused the write (nothing is stored).
        """
        run_id = f"r-{secrets.token_hex(6)}"
        jobs = [_new_job(spec, now, run_id, owner) for spec in specs]
        with self._tx() as session:
            session.add_all(jobs)
            session.flush()
            return run_id, [job.id for job in jobs]

    def get_job(self, job_id: int) -> JobView | None:
        """One job, or None if there is no such id."""
        with self._tx() as session:
            job = session.get(Job, job_id)
            return None if job is None else JobView.of(job)

    def list_jobs(
        self, states: Sequence[JobState] | None = None, limit: int = 100, *,
        run_id: str | None = None,
    ) -> list[JobView]:
        """Jobs newest first, optionally only those in ``states`` or of one run.

        :attr:`JobState.UNKNOWN` in ``states`` selects the jobs whose stored
        state this farm does not know (a newer farm's, e.g. ``paused``).
        """
        query = select(Job).order_by(Job.id.desc()).limit(limit)
        if states:
            query = query.where(_in_states(states))
        if run_id is not None:
            query = query.where(Job.run_id == run_id)
        with self._tx() as session:
            return [JobView.of(job) for job in session.scalars(query)]

    def job_counts(self) -> dict[JobState, int]:
        """How many jobs are in each state (one GROUP BY; a state with none is absent)."""
        query = select(Job.state, func.count()).group_by(Job.state)
        counts: dict[JobState, int] = {}
        with self._tx() as session:
            for state, count in session.execute(query):  # several unknown states read as one
                counts[state] = counts.get(state, 0) + count
        return counts

    def finished_attempts(self, since: datetime) -> list[FinishedAttempt]:
        """Attempts that ended at or after ``since``, in the order they ended.

        ``finished_at`` is the time the reporter passed in, not the commit
        order: an attempt can be committed with an end time a little before
        one already read. Callers read with an overlap and skip ids they saw.
        """
        query = (
            select(Attempt.id, Job.kind, Attempt.started_at, Attempt.finished_at)
            .join(Job, Attempt.job_id == Job.id)
            .where(Attempt.finished_at >= since)
            .order_by(Attempt.finished_at, Attempt.id)
        )
        with self._tx() as session:
            return [
                FinishedAttempt(attempt_id, kind, started_at, finished_at)
                for attempt_id, kind, started_at, finished_at in session.execute(query)
                if finished_at is not None  # always, by the where clause; for the type
            ]

    def attempts(self, job_id: int) -> list[AttemptView]:
        """A job's attempts, oldest first."""
        with self._tx() as session:
            rows = session.scalars(
                select(Attempt).where(Attempt.job_id == job_id).order_by(Attempt.id)
            )
            return [AttemptView.of(a) for a in rows]

    def cancel(self, job_id: int, now: datetime) -> bool:
        """Cancel a queued or running job; a running attempt's record ends now.

        The attempt becomes ``cancelled`` with ``finished_at`` at once, so a
        job whose farmd died does not show a running attempt. Its phones stay
        busy and held until the child is known to be stopped: a live farmd's
        next :meth:`heartbeat` returns False, it kills the child and reports
        (:meth:`fail_attempt` or :meth:`finish`), which frees them to
        ``ready``. If no farmd reports, :meth:`reap` frees them (``unhealthy``)
        once the attempt's last lease runs out, or :meth:`reclaim` at once
        when a farmd starts again on the attempt's host.

        Returns:
            True if the job was cancelled now; False if it is unknown or had ended.
        """
        with self._tx() as session:
            self._notify_jobs(session)
            return endings.cancel(session, job_id, now)

    # --- scheduling ----------------------------------------------------------------

    def snapshot(self) -> QueueSnapshot:
        """Every queued job and every device, for :func:`farm.queue.scheduler.plan`.

        For ``farmctl``'s wait reasons, which explain every queued job; a tick
        reads only :meth:`head`.
        """
        # Plain column rows, not ORM objects: identity-map bookkeeping was most
        # of the cost of reading 1000 queued jobs.
        with self._tx() as session:
            query = select(*head.COLUMNS).where(Job.state == JobState.QUEUED)
            jobs = [self._specs.job(row) for row in session.execute(query)]
            return QueueSnapshot(jobs=jobs, devices=_device_views(session))

    def head(
        self,
        now: datetime,
        *,
        seed: int = 0,
        kinds: Collection[str] | None = None,
        aging_step_s: float = AGING_STEP_S,
        host: str | None = None,
        device_kinds: Collection[str] | None = None,
    ) -> QueueSnapshot:
        """The queued jobs that settle a plan at ``now``, and every device (of ``host``).

        ``plan(store.head(now, seed=s, kinds=leases.keys()), now, seed=s,
        lease_s_by_kind=leases)`` decides as ``plan(store.snapshot(), ...)``
        does, reading only as many queued jobs as it needs
        (:mod:`farm.queue.head`): a tick's cost does not grow with the queue.

        Args:
            now: the plan's time (aware UTC).
            seed: the seed the plan will be given.
            kinds: the kinds that may start (the plan's ``lease_s_by_kind``
                keys); None: all.
            aging_step_s: seconds of waiting worth one priority point.
            host: plan over this farmd host's devices only (and those no host
                owns, :func:`farm.queue.devices.of_host`): the jobs are
                everyone's, the phones its own, so a job starts on whichever
                host has a fitting free phone. None: every device.
            device_kinds: the device kinds that may take work (the plan's);
                None: all.
        """
        with self._tx() as session:
            return head.read_head(
                session, _device_views(session, host), now, self._specs,
                seed=seed, kinds=kinds, aging_step_s=aging_step_s, device_kinds=device_kinds,
            )

    def claim(
        self, assignments: Sequence[Assignment], now: datetime, *, host: str | None = None
    ) -> list[Claim]:
        """Start the assigned jobs that are still queued on phones still ready.

        An assignment whose job or phones changed since the snapshot is skipped,
        not half-applied; so is one onto a phone that another attempt still
        holds (``phone_holds``: one running attempt per phone, enforced by the
        database whatever a racing state write left in ``devices``).

        Args:
            assignments: from :func:`~farm.queue.scheduler.plan`.
            now: the start time.
            host: the id of the farmd that runs them (``Settings.host_id``),
                stored on each attempt for :meth:`reclaim`.

        Returns:
            The attempts started, one per applied assignment.
        """
        with self._tx() as session:
            claims = [lifecycle.claim_one(session, a, now, host) for a in assignments]
        return [c for c in claims if c is not None]

    def heartbeat(self, attempt_id: int, now: datetime) -> bool:
        """Extend a running attempt's lease to ``now`` plus the lease it was claimed with.

        Returns:
            False if the attempt should stop: it ended (reaped, reported) or its
            job was cancelled. The caller then ends its child process.
        """
        with self._tx() as session:
            return lifecycle.heartbeat(session, attempt_id, now)

    def reap(self, now: datetime) -> list[AttemptView]:
        """End the running attempts whose lease expired before ``now``.

        Each one's job is requeued while attempts remain, else failed with an
        ``AbandonedJob`` reason; its phones go ``unhealthy`` so a health check
        runs before they take work again. farmd calls this at start and on
        every tick.

        Cancelled attempts whose lease ran out with no report from their
        executor (their farmd died) free their held phones, to ``unhealthy``.

        Returns:
            The attempts reaped, as they are now (state ``abandoned``).
        """
        with self._tx() as session:
            return lifecycle.reap(session, now)

    def reclaim(self, host: str, reason: str, now: datetime) -> list[AttemptView]:
        """End at once the attempts a dead farmd of ``host`` left running.

        For a farmd starting on ``host``: its predecessor died (kill -9, power
        cut), so none of its attempts can still report. Each ends
        ``abandoned`` (error kind ``Reclaimed``) without waiting for its lease,
        and its job is queued again without counting the attempt or a
        backoff. Their phones, and those still held by cancelled attempts of
        ``host``, go ``unhealthy``: checked and set up again before new work.
        Attempts of other hosts are left alone. Call it once at start, before
        this farmd claims anything: every running attempt of ``host`` is ended.

        Args:
            host: this farmd's ``Settings.host_id``.
            reason: stored as each attempt's error, e.g. ``"farmd restarted"``.
            now: when.

        Returns:
            The attempts ended, as they are now (state ``abandoned``).
        """
        with self._tx() as session:
            return endings.reclaim(session, host, reason, now)

    # --- ending attempts -------------------------------------------------------------

    def requeue(self, attempt_id: int, reason: str, now: datetime) -> bool:
        """Put a running attempt's job back in the queue without counting the attempt.

        For a clean farmd stop: the attempt is abandoned, its phones are ready
        again, and the job keeps every attempt it had. False if not running.
        """
        with self._tx() as session:
            return lifecycle.requeue(session, attempt_id, reason, now)

    def finish(self, attempt_id: int, outcome: Outcome, now: datetime) -> bool:
        """Commit an attempt's result and mark its job succeeded, exactly once.

        Returns:
            True if this call stored the result; False (and nothing changed) if
            the attempt had already ended, its job was cancelled, or the job
            already has a result.
        """
        try:
            with self._tx() as session:
                self._notify_jobs(session)
                return lifecycle.finish(session, attempt_id, outcome, now)
        except IntegrityError:
            return False  # results.job_id is unique: another attempt won

    def fail_attempt(self, attempt_id: int, error: Failure | FarmError, now: datetime) -> Decision:
        """Record a failed attempt and retry or fail its job by the error's kind.

        ``Retry.NEVER`` fails the job now with the message. ``OTHER_PHONE``
        marks the blamed phones ``unhealthy`` and requeues, excluding them
        (:func:`~farm.queue.scheduler.plan` ignores the exclusion while too few
        other phones are in service); its first fault on each phone costs the
        job no attempt, for up to ``attempts`` phones. ``SAME_LIMIT`` requeues
        after a backoff (:func:`farm.queue.lifecycle.backoff_s`). Both fail
        the job once ``attempts`` are used up.
        """
        failure = error if isinstance(error, Failure) else Failure.from_error(error)
        with self._tx() as session:
            self._notify_jobs(session)
            return lifecycle.fail(session, attempt_id, failure, now)

    def record_snapshot(self, attempt_id: int, snapshot: SnapshotData) -> None:
        """Store a phone's state taken before a measured run of a running attempt."""
        with self._tx() as session:
            lifecycle.add_snapshots(session, attempt_id, [snapshot])

    # --- results ------------------------------------------------------------------------

    def results(self, job_id: int | None = None, limit: int = 1000) -> list[ResultView]:
        """Results with their raw samples, newest first; one job's if ``job_id`` is given."""
        query = select(Result).order_by(Result.id.desc()).limit(limit)
        if job_id is not None:
            query = query.where(Result.job_id == job_id)
        with self._tx() as session:
            views = []
            for result in session.scalars(query):
                samples = list(
                    session.scalars(
                        select(Sample).where(Sample.result_id == result.id).order_by(Sample.index)
                    )
                )
                views.append(
                    ResultView(
                        result.id,
                        result.job_id,
                        result.attempt_id,
                        dict(result.summary),
                        result.created_at,
                        tuple(s.value for s in samples),
                        samples[0].unit if samples else "s",
                        tuple(s.serial for s in samples),
                        tuple(s.repetition for s in samples),
                        tuple(s.arm for s in samples),
                        tuple(s.round for s in samples),
                    )
                )
            return views

    def snapshots(self, job_id: int) -> list[SnapshotData]:
        """The phone states recorded before a job's measured runs, oldest first."""
        query = (
            select(DeviceSnapshot)
            .join(Attempt, Attempt.id == DeviceSnapshot.attempt_id)
            .where(Attempt.job_id == job_id)
            .order_by(DeviceSnapshot.at, DeviceSnapshot.id)
        )
        with self._tx() as session:
            return [
                SnapshotData(
                    s.serial,
                    s.at,
                    dict(s.battery),
                    dict(s.thermal),
                    dict(s.facts),
                    s.thermal_wait_s,
                    s.attempt_id,
                )
                for s in session.scalars(query)
            ]

    def tuning_records(self, job_id: int) -> list[TuningData]:
        """The tuning records a tune job produced, in the order stored."""
        query = select(TuningRecord).where(TuningRecord.job_id == job_id).order_by(TuningRecord.id)
        with self._tx() as session:
            return [
                TuningData(t.workload, t.target, dict(t.record), t.attempt_id)
                for t in session.scalars(query)
            ]

    def count_results(self, job_id: int) -> int:
        """How many results a job has: 0 or 1, by construction."""
        with self._tx() as session:
            return (
                session.scalar(
                    select(func.count()).select_from(Result).where(Result.job_id == job_id)
                )
                or 0
            )


def _in_states(states: Sequence[JobState]) -> ColumnElement[bool]:
    """Jobs in ``states``; :attr:`JobState.UNKNOWN` stands for every state not known here."""
    known = [s for s in states if s is not JobState.UNKNOWN]
    clause: ColumnElement[bool] = Job.state.in_(known)
    if JobState.UNKNOWN in states:  # never written: the stored value is a newer farm's
        clause = or_(clause, Job.state.not_in([s for s in JobState if s is not JobState.UNKNOWN]))
    return clause


def _device_views(session: Session, host: str | None = None) -> list[DeviceView]:
    """Every known phone (of ``host``, if given) as the scheduler sees it, by serial."""
    reserved = active_reservations(session)
    query = select(Device).order_by(Device.serial)
    if host is not None:
        query = query.where(of_host(host))
    views = []
    for d in session.scalars(query):
        reserved_by, reserved_until = reserved.get(d.serial, (None, None))
        views.append(DeviceView(d.serial, d.state, d.drained, dict(d.facts or {}),
                                d.held_outside, reserved_by, reserved_until, host=d.host,
                                kind=d.kind or "android"))
    return views


def _new_job(spec: JobSpec | Mapping[str, Any], now: datetime, run_id: str | None = None,
             owner: str | None = None) -> Job:
    """A queued job row of ``spec`` (validated here if raw).

    Raises:
        SpecError: raw data failed validation.
    """
    if isinstance(spec, Mapping):
        spec = parse_spec(spec)
    return Job(
        kind=spec.kind,
        spec=spec.to_json(),
        state=JobState.QUEUED,
        priority=spec.priority,
        submitted_at=now,
        not_before=spec.not_before,
        attempts_max=spec.attempts,
        attempts_made=0,
        timeout_s=spec.effective_timeout_s,
        excluded_serials=[],
        run_id=run_id,
        owner=owner,
    )
