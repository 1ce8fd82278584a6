"""How an attempt ends, inside one transaction: reap, requeue, finish, fail and retry.

These functions take an open :class:`~sqlalchemy.orm.Session` and ``now``;
:class:`farm.queue.store.Store` owns the transaction around each. Rows are
locked (``with_for_update``) and re-checked before they change, so a decision
made on a stale snapshot is skipped rather than applied twice. Rows are locked
in one order, attempt before job before devices, so two PostgreSQL
transactions never wait on each other in a circle.

Phone holds (:class:`~farm.queue.models.PhoneHold`) are the database's word on
which attempt owns a phone: a claim writes one per phone, and every path that
ends an attempt deletes them (:func:`farm.queue.transitions.release`), except
a cancel, which leaves them until the executor confirms the child stopped
(:mod:`farm.queue.endings`).

An attempt's start and lease (``claim_one``, ``heartbeat``) live in
:mod:`farm.queue.claims` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from farm import backoff
from farm.errors import Retry
from farm.queue import endings, transitions
from farm.queue.claims import claim_one, heartbeat
from farm.queue.endings import end_attempt, end_helper, locked_attempt, locked_job
from farm.queue.models import (
    Attempt,
    AttemptState,
    DeviceSnapshot,
    DeviceState,
    Job,
    JobState,
    Result,
    Sample,
    TuningRecord,
)
from farm.queue.records import AttemptView, Decision, Failure, Outcome, SnapshotData

__all__ = [
    "add_snapshots", "backoff_s", "claim_one", "fail", "finish", "heartbeat", "reap", "requeue"
]

ABANDONED = "AbandonedJob"  # rq's name for a job whose worker vanished
BACKOFF_BASE_S = 30.0
BACKOFF_MAX_S = 600.0


def backoff_s(attempts_made: int) -> float:
    """Seconds to wait before retry number ``attempts_made``: 30, 60, 120 ... at most 600.

    farm's one backoff rule (:func:`farm.backoff.backoff_s`) with the queue's
    base and cap; phone faults retry at once elsewhere instead.
    """
    return backoff.backoff_s(max(1, attempts_made), BACKOFF_BASE_S, BACKOFF_MAX_S)


def reap(session: Session, now: datetime) -> list[AttemptView]:
    """Abandon running attempts whose lease expired; requeue or fail their jobs.

    Also frees, to unhealthy, the phones still held by cancelled attempts whose
    lease ran out with no report (:func:`farm.queue.endings.release_expired_cancels`).
    """
    expired = list(
        session.scalars(
            select(Attempt)
            .where(Attempt.state == AttemptState.RUNNING, Attempt.lease_expires_at < now)
            .order_by(Attempt.id)
            .with_for_update(skip_locked=True)
        )
    )
    for attempt in expired:
        message = f"lease expired at {attempt.lease_expires_at.isoformat()} without a heartbeat"
        if attempt.helper:  # its rows are claimable again; the job goes on
            end_helper(session, attempt, AttemptState.ABANDONED, now, ABANDONED, message,
                       DeviceState.UNHEALTHY)
            transitions.note(session, "lease_expired", job_id=attempt.job_id,
                             attempt=attempt.id, serials=list(attempt.serials), helper=True)
            continue
        end_attempt(attempt, AttemptState.ABANDONED, now, ABANDONED, message)
        job = locked_job(session, attempt.job_id)
        transitions.release(
            session,
            attempt.id,
            attempt.serials,
            DeviceState.UNHEALTHY,
            f"lease of attempt {attempt.id} expired",
            now,
        )
        if job.state is JobState.RUNNING:
            if job.attempts_made < job.attempts_max:
                job.state = JobState.QUEUED
            else:
                _fail_job(job, now, f"{ABANDONED}: {message} (after {job.attempts_made} attempts)")
        transitions.note(
            session,
            "lease_expired",
            job_id=job.id,
            attempt=attempt.id,
            serials=list(attempt.serials),
            job_state=job.state.value,
        )
    endings.release_expired_cancels(session, now)
    session.flush()
    return [AttemptView.of(a) for a in expired]


def requeue(session: Session, attempt_id: int, reason: str, now: datetime) -> bool:
    """End a running attempt that nobody failed (farmd stopping) and queue its job again.

    The attempt does not count against the job's limit and earns no backoff,
    and its phones go back to ready: a clean shutdown is nobody's fault.
    False if the attempt is not running; if it was cancelled, the caller has
    stopped its child, so its held phones go back to ready.
    """
    attempt = locked_attempt(session, attempt_id)
    if attempt is None or attempt.state is not AttemptState.RUNNING:
        if attempt is not None:
            endings.confirm_stopped(session, attempt, now)
        return False
    job = endings.requeue_uncounted(session, attempt, "Requeued", reason, DeviceState.READY,
                                    f"attempt {attempt.id} requeued: {reason}", now)
    transitions.note(session, "attempt_requeued", job_id=job.id, attempt=attempt.id,
                     reason=reason)
    session.flush()
    return True


def finish(session: Session, attempt_id: int, outcome: Outcome, now: datetime) -> bool:
    """Store the result of a running attempt; False if it may not (see Store.finish).

    A cancelled attempt stores nothing, but its report proves its child is done
    with the phones, so their holds are released (to ready).
    """
    attempt = locked_attempt(session, attempt_id)
    if attempt is None or attempt.state is not AttemptState.RUNNING:
        if attempt is not None:
            endings.confirm_stopped(session, attempt, now)
        return False
    job = locked_job(session, attempt.job_id)
    if job.state is not JobState.RUNNING:
        _end_cancelled(session, attempt, now, None, "job cancelled before its result")
        return False
    if attempt.helper:  # its tasks' rows and records are in the database; no result
        end_helper(session, attempt, AttemptState.SUCCEEDED, now, None, None, DeviceState.READY)
        return True
    if outcome.sample_serials and len(outcome.sample_serials) != len(outcome.samples):
        raise ValueError("sample_serials must be empty or as long as samples")
    for name in ("sample_repetitions", "sample_arms", "sample_rounds"):
        tags = getattr(outcome, name)
        if tags and len(tags) != len(outcome.samples):
            raise ValueError(f"{name} must be empty or as long as samples")
    result = Result(
        job_id=job.id, attempt_id=attempt.id, summary=dict(outcome.summary), created_at=now
    )
    session.add(result)
    session.flush()  # the unique job_id fails here if a result exists
    serials: list[str | None] = [*outcome.sample_serials] or [None] * len(outcome.samples)
    repetitions = [*outcome.sample_repetitions] or [0] * len(outcome.samples)
    arms: list[str | None] = [*outcome.sample_arms] or [None] * len(outcome.samples)
    rounds: list[int | None] = [*outcome.sample_rounds] or [None] * len(outcome.samples)
    session.add_all(
        Sample(result_id=result.id, index=i, value=float(v), unit=outcome.unit, serial=s,
               repetition=r, arm=arm, round=n)
        for i, (v, s, r, arm, n) in enumerate(zip(outcome.samples, serials, repetitions, arms,
                                                  rounds, strict=True))
    )
    add_snapshots(session, attempt.id, outcome.snapshots)
    session.add_all(
        TuningRecord(
            job_id=job.id,
            attempt_id=attempt.id,
            workload=t.workload,
            target=t.target,
            record=dict(t.record),
            created_at=now,
        )
        for t in outcome.tuning_records
    )
    end_attempt(attempt, AttemptState.SUCCEEDED, now, None, None)
    job.state = JobState.SUCCEEDED
    job.finished_at = now
    transitions.release(
        session,
        attempt.id,
        attempt.serials,
        DeviceState.READY,
        f"attempt {attempt.id} succeeded",
        now,
    )
    transitions.note(
        session, "result_committed", job_id=job.id, attempt=attempt.id, samples=len(outcome.samples)
    )
    return True


def fail(session: Session, attempt_id: int, failure: Failure, now: datetime) -> Decision:
    """Record a failed attempt; apply the retry rule of its error kind."""
    attempt = locked_attempt(session, attempt_id)
    decision = _fail(session, attempt, failure, now)
    if attempt is not None and decision is not Decision.IGNORED:
        transitions.note(
            session,
            "attempt_failed",
            job_id=attempt.job_id,
            attempt=attempt.id,
            error_kind=failure.error_kind,
            retry=failure.retry.value,
            decision=decision.value,
            reason=failure.message,
        )
    return decision


def _fail(session: Session, attempt: Attempt | None, failure: Failure, now: datetime) -> Decision:
    if attempt is None:
        return Decision.IGNORED
    if attempt.state is not AttemptState.RUNNING:
        # A cancelled attempt's executor reports that it stopped: free its phones.
        released = endings.confirm_stopped(session, attempt, now)
        return Decision.CANCELLED if released else Decision.IGNORED
    job = locked_job(session, attempt.job_id)
    message = f"{failure.error_kind}: {failure.message}"
    blamed = _blamed(attempt, failure)
    if job.state is not JobState.RUNNING:
        _end_cancelled(session, attempt, now, failure.error_kind, failure.message)
        return Decision.CANCELLED
    if attempt.helper:  # the job goes on with its main attempt
        transitions.release(session, attempt.id, blamed, DeviceState.UNHEALTHY, message, now)
        end_helper(session, attempt, AttemptState.FAILED, now, failure.error_kind,
                   failure.message, DeviceState.READY)
        return Decision.HELPER_ENDED
    end_attempt(attempt, AttemptState.FAILED, now, failure.error_kind, failure.message)
    transitions.release(session, attempt.id, blamed, DeviceState.UNHEALTHY, message, now)
    transitions.release(
        session,
        attempt.id,
        attempt.serials,
        DeviceState.READY,
        f"attempt {attempt.id} failed: {failure.error_kind}",
        now,
    )
    if failure.retry is Retry.NEVER:
        _fail_job(job, now, message)
        return Decision.FAILED
    if _given_back(job, blamed):
        job.attempts_made = max(0, job.attempts_made - 1)
    if job.attempts_made >= job.attempts_max:
        _fail_job(job, now, f"{message} (after {job.attempts_made} attempts)")
        return Decision.FAILED
    job.state = JobState.QUEUED
    if failure.retry is Retry.OTHER_PHONE:
        # Stored even when no other phone fits: plan() ignores the exclusion on
        # each tick while too few other phones are in service.
        job.excluded_serials = sorted(set(job.excluded_serials or ()) | set(blamed))
    else:
        job.retry_at = now + timedelta(seconds=backoff_s(job.attempts_made))
    return Decision.REQUEUED


def add_snapshots(session: Session, attempt_id: int, snapshots: Iterable[SnapshotData]) -> None:
    """Store phone snapshots taken during an attempt."""
    session.add_all(
        DeviceSnapshot(
            attempt_id=attempt_id,
            serial=s.serial,
            at=s.at,
            battery=dict(s.battery),
            thermal=dict(s.thermal),
            facts=dict(s.facts),
            thermal_wait_s=s.thermal_wait_s,
        )
        for s in snapshots
    )


def _given_back(job: Job, blamed: Sequence[str]) -> bool:
    """Whether a phone's fault costs the job no attempt: the first on each of its phones.

    A phone whose app crashed under the job (a ``SessionError``) is no verdict
    on the job: the retry runs on another phone and the job's attempts stay
    for faults of its own. A second fault on a phone the job already failed
    on counts, and so does every fault once the job has failed on
    ``attempts_max`` phones, so a job that crashes every phone's app itself
    ends after at most twice its attempts.
    """
    excluded = set(job.excluded_serials or ())
    return bool(set(blamed) - excluded) and len(excluded) < job.attempts_max


def _blamed(attempt: Attempt, failure: Failure) -> list[str]:
    if failure.retry is not Retry.OTHER_PHONE:
        return []
    if failure.serial is not None and failure.serial in attempt.serials:
        return [failure.serial]
    return list(attempt.serials)


def _end_cancelled(
    session: Session, attempt: Attempt, now: datetime, kind: str | None, error: str | None
) -> None:
    """End an attempt whose job was cancelled meanwhile; its phones go back to ready."""
    end_attempt(attempt, AttemptState.CANCELLED, now, kind, error)
    transitions.release(
        session,
        attempt.id,
        attempt.serials,
        DeviceState.READY,
        f"attempt {attempt.id} ended: job cancelled",
        now,
    )


def _fail_job(job: Job, now: datetime, error: str) -> None:
    job.state = JobState.FAILED
    job.finished_at = now
    job.error = error
