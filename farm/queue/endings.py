"""Attempts that end without a result from their executor: cancel and reclaim.

Inside one transaction, as :mod:`farm.queue.lifecycle`; the row helpers it
shares live here too. The rule for phones::

    running ──cancel──> cancelled, holds kept ──executor reports──> holds released, ready
                               │ (finish, fail_attempt or requeue: its child stopped)
                               ├── lease runs out (reap) ──────────> released, unhealthy
                               └── farmd restarts on its host (reclaim) ──> unhealthy

A cancel ends the attempt's record at once (``cancelled``, ``finished_at``),
so ``farmctl job`` is right even when the farmd running it is dead. Its phones
stay busy and held, because a live farmd may still have the child measuring on
them until its next heartbeat (every dispatcher tick) says stop; the
executor's report then frees them to ``ready``. A dead farmd never reports:
its phones are freed to ``unhealthy`` (checked before new work) when the
attempt's last lease runs out, or at once when a farmd starts on the same host
and calls :func:`reclaim`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlalchemy.sql import ColumnElement

from farm.queue import transitions
from farm.queue.models import Attempt, AttemptState, DeviceState, Job, JobState, PhoneHold
from farm.queue.records import AttemptView

__all__ = [
    "CANCELLED",
    "RECLAIMED",
    "cancel",
    "confirm_stopped",
    "end_attempt",
    "locked_attempt",
    "locked_job",
    "reclaim",
    "release_expired_cancels",
]

CANCELLED = "Cancelled"  # error_kind of an attempt ended by a cancel
RECLAIMED = "Reclaimed"  # error_kind of an attempt whose farmd died and was replaced


def end_attempt(
    attempt: Attempt, state: AttemptState, now: datetime, kind: str | None, error: str | None
) -> None:
    """Close an attempt's record (its phones are the caller's business)."""
    attempt.state = state
    attempt.finished_at = now
    attempt.error_kind = kind
    attempt.error = error


def end_helper(session: Session, attempt: Attempt, state: AttemptState, now: datetime,
               kind: str | None, error: str | None, to_state: DeviceState) -> None:
    """End a helper attempt (:mod:`farm.queue.helpers`) and free its phones to ``to_state``.

    Its job is left as it is: the main attempt makes the job's result, and
    the helper's task rows are claimable again once it no longer runs.
    """
    end_attempt(attempt, state, now, kind, error)
    transitions.release(session, attempt.id, attempt.serials, to_state,
                        f"helper attempt {attempt.id} ended: {state.value}", now)
    transitions.note(session, "helper_attempt_ended", job_id=attempt.job_id,
                     attempt=attempt.id, state=state.value, error_kind=kind)


def locked_attempt(session: Session, attempt_id: int) -> Attempt | None:
    """The attempt row, locked for update; None if there is no such id."""
    return session.scalars(
        select(Attempt).where(Attempt.id == attempt_id).with_for_update()
    ).one_or_none()


def locked_job(session: Session, job_id: int) -> Job:
    """The job row, locked for update (it exists: attempts reference it)."""
    return session.scalars(select(Job).where(Job.id == job_id).with_for_update()).one()


def cancel(session: Session, job_id: int, now: datetime) -> bool:
    """Cancel a queued or running job and end its running attempts' records now.

    The attempts' phones stay held until their executor reports, their lease
    runs out, or their host's next farmd reclaims them (module doc).

    Returns:
        True if the job was cancelled now; False if it is unknown or had ended.
    """
    running = select(Attempt).where(
        Attempt.job_id == job_id, Attempt.state == AttemptState.RUNNING
    ).order_by(Attempt.id)
    attempts = list(session.scalars(running.with_for_update()))  # attempt before job
    job = session.scalars(select(Job).where(Job.id == job_id).with_for_update()).one_or_none()
    if job is None or job.state not in (JobState.QUEUED, JobState.RUNNING):
        return False
    # A claim committed between the two locks started one more; the job lock stops any
    # other. Skip it if locked: whoever holds it (its executor reporting, a heartbeat)
    # then finds the job cancelled and ends it; waiting here would invert the lock order.
    seen = {a.id for a in attempts}
    attempts += [
        a for a in session.scalars(running.with_for_update(skip_locked=True)) if a.id not in seen
    ]
    job.state = JobState.CANCELLED
    job.finished_at = now
    job.error = "cancelled"
    for attempt in attempts:
        end_attempt(attempt, AttemptState.CANCELLED, now, CANCELLED, "job cancelled")
        transitions.note(session, "attempt_cancelled", job_id=job_id, attempt=attempt.id,
                         serials=list(attempt.serials))
    return True


def confirm_stopped(session: Session, attempt: Attempt, now: datetime) -> bool:
    """The executor of a cancelled attempt reported: free its held phones to ready.

    Args:
        session: the open transaction.
        attempt: a locked attempt row that is not running.
        now: when.

    Returns:
        True if it held phones (now released); False if nothing was held.
    """
    if attempt.state is not AttemptState.CANCELLED or not _held(session, attempt.id):
        return False
    transitions.release(session, attempt.id, attempt.serials, DeviceState.READY,
                        f"attempt {attempt.id} stopped: job cancelled", now)
    return True


def release_expired_cancels(session: Session, now: datetime) -> list[int]:
    """Free the phones of cancelled attempts whose lease ran out with no report.

    Their farmd died before it could stop them; the phones go ``unhealthy``.

    Returns:
        The attempt ids whose phones were freed.
    """
    return _release_cancelled(session, Attempt.lease_expires_at < now, now,
                              "lease ran out after its job was cancelled")


def requeue_uncounted(
    session: Session,
    attempt: Attempt,
    error_kind: str,
    reason: str,
    to_state: DeviceState,
    release_reason: str,
    now: datetime,
) -> Job:
    """End a running attempt nobody failed and queue its job again, the attempt uncounted.

    The attempt ends ``abandoned`` with ``error_kind``/``reason``; its phones
    go to ``to_state``; its job (if still running) is queued again with the
    attempt given back and no backoff. The one rule behind a clean stop
    (:func:`farm.queue.lifecycle.requeue`) and a dead farmd's reclaim.

    Returns:
        The attempt's job, locked.
    """
    job = locked_job(session, attempt.job_id)
    if attempt.helper:  # a helper's end leaves its job alone (farm.queue.helpers)
        end_helper(session, attempt, AttemptState.ABANDONED, now, error_kind, reason, to_state)
        return job
    end_attempt(attempt, AttemptState.ABANDONED, now, error_kind, reason)
    transitions.release(session, attempt.id, attempt.serials, to_state, release_reason, now)
    if job.state is JobState.RUNNING:
        job.state = JobState.QUEUED
        job.attempts_made = max(0, job.attempts_made - 1)
    return job


def reclaim(session: Session, host: str, reason: str, now: datetime) -> list[AttemptView]:
    """End every attempt a dead farmd of ``host`` left running; free its phones.

    Each running attempt of ``host`` ends ``abandoned`` (error kind
    ``Reclaimed``, error ``reason``) and its job is queued again without
    counting the attempt and without a backoff, as :func:`farm.queue.lifecycle.requeue`
    does: farmd's death is not the job's fault. Its phones, and those still
    held by cancelled attempts of ``host``, go ``unhealthy``: whatever the dead
    farmd left on them is checked before new work.

    Returns:
        The attempts ended now, as they are now.
    """
    running = list(
        session.scalars(
            select(Attempt)
            .where(Attempt.host == host, Attempt.state == AttemptState.RUNNING)
            .order_by(Attempt.id)
            .with_for_update()
        )
    )
    for attempt in running:
        job = requeue_uncounted(session, attempt, RECLAIMED, reason, DeviceState.UNHEALTHY,
                                f"attempt {attempt.id} reclaimed: {reason}", now)
        transitions.note(session, "attempt_reclaimed", job_id=job.id, attempt=attempt.id,
                         serials=list(attempt.serials), host=host, reason=reason)
    _release_cancelled(session, Attempt.host == host, now, f"reclaimed: {reason}")
    session.flush()
    return [AttemptView.of(a) for a in running]


def _held(session: Session, attempt_id: int) -> bool:
    query = select(PhoneHold.serial).where(PhoneHold.attempt_id == attempt_id).limit(1)
    return session.scalar(query) is not None


def _release_cancelled(
    session: Session, which: ColumnElement[bool], now: datetime, why: str
) -> list[int]:
    """Free, to unhealthy, the held phones of the cancelled attempts matching ``which``."""
    attempts = list(
        session.scalars(
            select(Attempt)
            .where(
                Attempt.state == AttemptState.CANCELLED,
                Attempt.id.in_(select(PhoneHold.attempt_id)),
                which,
            )
            .order_by(Attempt.id)
            .with_for_update(skip_locked=True)
        )
    )
    for attempt in attempts:
        transitions.release(session, attempt.id, attempt.serials, DeviceState.UNHEALTHY,
                            f"attempt {attempt.id} {why}", now)
        transitions.note(session, "cancelled_attempt_released", job_id=attempt.job_id,
                         attempt=attempt.id, serials=list(attempt.serials), reason=why)
    return [a.id for a in attempts]
