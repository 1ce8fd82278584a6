"""The jobs of :class:`farm.queue.store.Store`: enqueue, read, count, cancel.

A job is stored ``queued`` by :meth:`JobOps.enqueue` (a fan-out's jobs under one
run id by :meth:`JobOps.enqueue_run`), read back as frozen views, and ended by
:meth:`JobOps.cancel`; what happens between (claims, leases, attempts ending)
is :mod:`farm.queue.attempt_ops`.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select

from farm.queue import endings
from farm.queue.models import Attempt, Job, JobState
from farm.queue.ops import JobTransactionOps
from farm.queue.records import AttemptView, FinishedAttempt, JobView
from farm.queue.spec import JobSpec, parse_spec

__all__ = ["JobOps"]


class JobOps(JobTransactionOps):
    """Job operations; mixed into Store, which provides ``_tx()`` and ``_notify_jobs()``."""

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


def _in_states(states: Sequence[JobState]) -> ColumnElement[bool]:
    """Jobs in ``states``; :attr:`JobState.UNKNOWN` stands for every state not known here."""
    known = [s for s in states if s is not JobState.UNKNOWN]
    clause: ColumnElement[bool] = Job.state.in_(known)
    if JobState.UNKNOWN in states:  # never written: the stored value is a newer farm's
        clause = or_(clause, Job.state.not_in([s for s in JobState if s is not JobState.UNKNOWN]))
    return clause


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
