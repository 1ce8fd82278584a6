"""An attempt's start and its lease, inside one transaction: claim an assignment, heartbeat.

A claim writes the attempt and one phone hold per phone
(:class:`~farm.queue.models.PhoneHold`, the database's word on which attempt
owns a phone) under a savepoint, after re-checking the job and phones it locked,
so a decision made on a stale snapshot is skipped rather than applied twice; a
heartbeat pushes the lease forward. How an attempt ends is
:mod:`farm.queue.lifecycle`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from farm.queue import transitions
from farm.queue.endings import locked_attempt
from farm.queue.models import (
    Attempt,
    AttemptState,
    Device,
    DeviceState,
    Job,
    JobState,
    Reservation,
)
from farm.queue.records import AttemptView, Claim, JobView
from farm.queue.scheduler import Assignment

__all__ = ["claim_one", "heartbeat", "reserved_since"]


def claim_one(
    session: Session, assignment: Assignment, now: datetime, host: str | None = None
) -> Claim | None:
    """Start one assignment, or return None (changing nothing) if it went stale.

    The attempt and its phone holds are written under a savepoint: a phone
    that looks ready but is still held (by an attempt a fleet write raced, or
    one whose phone went offline and came back) makes the hold's primary key
    refuse, and this assignment alone is rolled back; the rest of the claim
    goes on.

    Args:
        session: the open transaction.
        assignment: from the plan.
        now: the start time.
        host: the farmd host id that will run it (``attempts.host``).
    """
    lease_s = assignment.lease_s
    serials = list(assignment.serials)
    if not serials or len(set(serials)) != len(serials):
        return None
    job = session.scalars(
        select(Job)
        .where(Job.id == assignment.job_id, Job.state == JobState.QUEUED)
        .with_for_update(skip_locked=True)
    ).one_or_none()
    if job is None or job.attempts_made >= job.attempts_max:
        return None
    devices = list(
        session.scalars(
            select(Device)
            .where(
                Device.serial.in_(serials),
                Device.state == DeviceState.READY,
                Device.drained.is_(False),
                Device.held_outside.is_(None),  # a hand session has it (Store.mark_held_outside)
                ~exists().where(  # a person reserved it (farm.queue.reservations)
                    Reservation.serial == Device.serial,
                    Reservation.ended_at.is_(None),
                    Reservation.expires_at > now,
                ),
            )
            .order_by(Device.serial)
            .with_for_update(skip_locked=True)
        )
    )
    if len(devices) != len(serials):
        return None
    if reserved_since(session, serials, now):
        return None
    if host is not None and any(d.host not in (None, host) for d in devices):
        return None  # another host's phone: only its owner runs it (farm.queue.hosts)
    if host is not None and session.scalar(select(exists().where(
            Attempt.job_id == job.id, Attempt.host == host,
            Attempt.state == AttemptState.RUNNING))):
        return None  # its helper runs here: one writer per host's work folder (farm.queue.helpers)
    attempt = Attempt(
        job_id=job.id,
        serials=serials,
        state=AttemptState.RUNNING,
        lease_s=lease_s,
        lease_expires_at=now + timedelta(seconds=lease_s),
        heartbeat_at=now,
        started_at=now,
        host=host,
    )
    if not transitions.start_holding(session, attempt, devices, f"job {job.id} attempt", now):
        return None
    job.state = JobState.RUNNING
    job.attempts_made += 1
    job.retry_at = None
    session.flush()
    transitions.note(
        session,
        "attempt_started",
        job_id=job.id,
        attempt=attempt.id,
        serials=serials,
        lease_s=lease_s,
        attempt_number=job.attempts_made,
    )
    return Claim(JobView.of(job), AttemptView.of(attempt))


def reserved_since(session: Session, serials: list[str], now: datetime) -> set[str]:
    """Those of ``serials`` (device rows this transaction locked) reserved and open at ``now``.

    Asked again after the lock: a select of ready, unreserved phones ``FOR
    UPDATE`` can return a phone reserved meanwhile. A reservation locks the
    device row but does not change it, and PostgreSQL's FOR UPDATE rechecks
    only the locked row, so the select's ``NOT EXISTS`` on reservations keeps
    the answer of the snapshot its statement began with (READ COMMITTED;
    PostgreSQL docs, "Read Committed Isolation Level"). This statement's
    snapshot is newer than the lock, so it sees every reservation made under it.
    """
    return set(session.scalars(select(Reservation.serial).where(
        Reservation.serial.in_(serials), Reservation.ended_at.is_(None),
        Reservation.expires_at > now)))


def heartbeat(session: Session, attempt_id: int, now: datetime) -> bool:
    """Extend a running attempt's lease by its ``lease_s`` from ``now``.

    False (nothing changed) if the attempt ended or its job is no longer running.
    """
    attempt = locked_attempt(session, attempt_id)
    if attempt is None or attempt.state is not AttemptState.RUNNING:
        return False
    job = session.get(Job, attempt.job_id)
    if job is None or job.state is not JobState.RUNNING:
        return False
    attempt.heartbeat_at = now
    attempt.lease_expires_at = now + timedelta(seconds=attempt.lease_s)
    return True
