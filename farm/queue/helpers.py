"""Helper attempts: another host's idle phones join a model tune job that is already running.

A model tune job's tasks are rows any attempt of the job may claim
(:mod:`farm.queue.task_work`). The job's own attempt (its "main" attempt,
started by :func:`farm.queue.lifecycle.claim_one`) claims its share; while
rows are left that no live attempt holds, a farmd on another host with ready
phones of the same device model starts a *helper attempt* of the job
(:meth:`HelperOps.claim_helpers`): an ``attempts`` row with ``helper`` set,
its phones held like any attempt's (``phone_holds``, busy), on its own host
and tracker. The helper tunes the rows it claims and ends; it stores no
result, and its end, however it comes (success, failure, lease run out,
farmd gone), never changes the job's state or attempt count
(:mod:`farm.queue.lifecycle`, :mod:`farm.queue.endings`): the main attempt
makes the one build and the job's result.

Rules of a helper claim, checked in the claim's transaction:

* the job runs, its kind takes helpers for its spec (:class:`HelperKind`, the
  kind's ``helper_attempts`` hook: a ``tune`` of a model), and it has a task
  row that is not done and that no live attempt holds;
* no attempt of the job runs on this host already (a host's work folder of a
  job, :func:`farm.jobs.tuning_db.tune_work_dir`, has one writer), and no other
  host's helper does either: one main attempt and one helper per job, the
  smallest split that lets two hosts tune one model at once;
* its phones are this host's, ready, in service and of the device kind and
  model of the main attempt's first phone (records are kept and seeded by
  device model, :func:`farm.queue.capabilities.device_model`): at most as
  many as the job's ``params.phones``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exists, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from farm.queue import transitions
from farm.queue.capabilities import device_model
from farm.queue.claims import reserved_since
from farm.queue.devices import of_host
from farm.queue.models import (
    Attempt,
    AttemptState,
    Device,
    DeviceState,
    Job,
    JobState,
    Reservation,
    TuneTaskWork,
)
from farm.queue.ops import TransactionOps
from farm.queue.records import AttemptView, Claim, JobView
from farm.queue.task_work import DONE

__all__ = ["HelperKind", "HelperOps", "claim_helper"]


@dataclass(frozen=True)
class HelperKind:
    """A job kind whose running jobs may take helper attempts, as the queue asks it.

    The dispatcher builds one per kind that declares the hook
    (:attr:`farm.kinds.base.Kind.helper_attempts`); the queue never names a kind.

    Attributes:
        lease_s: a helper attempt's lease, seconds (the kind's).
        takes_helpers: a job's stored spec params -> whether it takes helpers
            (a model tune does, a gemm tune does not).
    """

    lease_s: float
    takes_helpers: Callable[[Mapping[str, Any]], bool]


def _free_rows(job_id: int, now: datetime) -> Any:
    """A row of the job that is not done and no live attempt holds (claimable)."""
    holder = Attempt.__table__.alias("holder")
    return exists().where(
        TuneTaskWork.job_id == job_id, TuneTaskWork.state != DONE,
        or_(TuneTaskWork.attempt_id.is_(None),
            ~exists().where(holder.c.id == TuneTaskWork.attempt_id,
                            holder.c.state == AttemptState.RUNNING,
                            holder.c.lease_expires_at >= now)))


def _wanted(session: Session, job: Job, host: str, kinds: Mapping[str, HelperKind],
            now: datetime) -> tuple[str, str] | None:
    """The device kind and model a helper of ``job`` on ``host`` needs; None: no helper fits."""
    params = (job.spec or {}).get("params") or {}
    kind = kinds.get(job.kind)
    if kind is None or not kind.takes_helpers(params):
        return None
    running = list(session.scalars(select(Attempt).where(
        Attempt.job_id == job.id, Attempt.state == AttemptState.RUNNING).order_by(Attempt.id)))
    mains = [a for a in running if not a.helper]
    if not mains or any(a.helper or a.host == host for a in running):
        return None  # no main to help, a helper runs already, or this host has the job
    if not session.scalar(select(_free_rows(job.id, now))):
        return None
    first = session.get(Device, mains[0].serials[0])
    return None if first is None else (first.kind, device_model(first.facts or {}))


def _fitting(session: Session, job: Job, kind: str, model: str, where: ColumnElement[bool],
             now: datetime, *, lock: bool = False) -> list[Device]:
    """The devices ``where`` selects that a helper of ``job`` may hold, by serial.

    Ready, in service, not held outside farm nor reserved, not excluded by the
    job, of the device ``kind`` and ``model`` of its main attempt's first phone.
    """
    query = select(Device).where(
        where, Device.state == DeviceState.READY, Device.drained.is_(False),
        Device.held_outside.is_(None), Device.kind == kind,
        Device.serial.not_in(list(job.excluded_serials or ())),
        ~exists().where(Reservation.serial == Device.serial, Reservation.ended_at.is_(None),
                        Reservation.expires_at > now)).order_by(Device.serial)
    if lock:
        query = query.with_for_update(skip_locked=True)
    return [d for d in session.scalars(query) if device_model(d.facts or {}) == model]


def claim_helper(session: Session, job_id: int, host: str, kinds: Mapping[str, HelperKind],
                 now: datetime) -> Claim | None:
    """Start a helper attempt of ``job_id`` on ``host``'s fitting ready phones, or return None.

    Args:
        session: the open transaction.
        job_id: a running job of a kind that takes helpers.
        host: this farmd's host id (the helper's phones are its own).
        kinds: the kinds whose jobs may take helpers, by name (the helper's lease is
            its job's kind's).
        now: the start time.

    Returns:
        The helper's claim (``attempt.helper`` set); None (nothing changed)
        when the rules of the module's docstring refuse it.
    """
    job = session.scalars(select(Job).where(Job.id == job_id, Job.state == JobState.RUNNING)
                          .with_for_update(skip_locked=True)).one_or_none()
    if job is None or (wanted := _wanted(session, job, host, kinds, now)) is None:
        return None
    lease_s = kinds[job.kind].lease_s
    phones = max(1, int(((job.spec or {}).get("params") or {}).get("phones") or 1))
    fitting = _fitting(session, job, *wanted, of_host(host), now, lock=True)
    reserved = reserved_since(session, [d.serial for d in fitting], now)
    devices = [d for d in fitting if d.serial not in reserved][:phones]
    if not devices:
        return None
    serials = [d.serial for d in devices]
    attempt = Attempt(job_id=job.id, serials=serials, state=AttemptState.RUNNING,
                      lease_s=lease_s, lease_expires_at=now + timedelta(seconds=lease_s),
                      heartbeat_at=now, started_at=now, host=host, helper=True)
    if not transitions.start_holding(session, attempt, devices,
                                     f"job {job.id} helper attempt", now):
        return None
    transitions.note(session, "helper_attempt_started", job_id=job.id, attempt=attempt.id,
                     serials=serials, host=host, device_model=wanted[1])
    return Claim(JobView.of(job), AttemptView.of(attempt))


class HelperOps(TransactionOps):
    """Helper attempt claims; mixed into Store, which provides ``_tx()``."""

    def claim_helpers(self, host: str, kinds: Mapping[str, HelperKind],
                      now: datetime) -> list[Claim]:
        """Start helper attempts on ``host`` for the running jobs that want one.

        Args:
            host: this farmd's host id.
            kinds: the job kinds that take helpers, by name (:class:`HelperKind`);
                none: no helper starts.
            now: the start time.

        Returns:
            The helpers started (at most one per job; a phone goes to one of them).

        Raises:
            StoreError: the database refused the claim.
        """
        with self._tx() as session:
            jobs = list(session.scalars(select(Job.id).where(
                Job.state == JobState.RUNNING, Job.kind.in_(list(kinds)),
                exists().where(TuneTaskWork.job_id == Job.id, TuneTaskWork.state != DONE))
                .order_by(Job.priority.desc(), Job.id)))
            claims = [claim_helper(session, job_id, host, kinds, now) for job_id in jobs]
        return [c for c in claims if c is not None]

    def helper_may_come(self, attempt_id: int, now: datetime) -> bool:
        """Whether another host has a device a helper of ``attempt_id``'s job could hold now.

        Asked by a model tune job's main attempt before it claims its task rows
        (:class:`farm.tuning.work_progress.TaskWorkProgress`): with such a device it
        leaves about half the rows to a helper. The devices are those
        :func:`claim_helper` would take (the same filter), on any host but the
        attempt's own.

        Raises:
            StoreError: the database cannot be read.
        """
        with self._tx() as session:
            attempt = session.get(Attempt, attempt_id)
            job = None if attempt is None else session.get(Job, attempt.job_id)
            first = None if attempt is None or not attempt.serials else session.get(
                Device, attempt.serials[0])
            if attempt is None or job is None or first is None or attempt.host is None:
                return False
            elsewhere = Device.host.is_not(None) & (Device.host != attempt.host)
            return bool(_fitting(session, job, first.kind, device_model(first.facts or {}),
                                 elsewhere, now))
