"""A model tune job's task work: rows any host's attempt of the job may claim, and its one build.

Once a tune attempt knows the model's tasks (extraction is cached per model
digest) it writes one ``tune_task_work`` row per task workload
(:meth:`TaskWorkOps.add_task_work`, idempotent: the unique ``(job_id, shash)``
makes a second writer's rows no-ops) and claims the rows it may tune
(:meth:`TaskWorkOps.claim_task_work`). A row is claimable when it is not
done and no live attempt holds it: never claimed, claimed by the caller
already, or claimed by an attempt that no longer runs or whose lease ran out
(a farmd killed with -9 heartbeats no more). The attempt's lease is the
task's lease: no second clock to keep. On PostgreSQL candidate rows are
locked ``FOR UPDATE SKIP LOCKED`` (as jobs are claimed), and each claim is a
compare-and-set on the row's ``attempt_id``, so two hosts claiming at once
never both get one row, on SQLite too.

After each measured batch the attempt reports each task's trials
(:meth:`TaskWorkOps.report_task_work`): the API, the dashboard and ``farmctl
job`` read progress from these rows on any host. A report from an attempt
that lost its row is refused (False).

The tuned build is made once per job (:meth:`TaskWorkOps.claim_tune_build`):
only when every task row is done, and only by the attempt holding the job's
``tune_builds`` row (its ``job_id`` is the primary key, so two hosts can never
both insert it). It is taken over only from an attempt that no longer runs
(ended, or its lease ran out), built or not: a library made by an attempt that
is gone went with its host's work folder. So no two live attempts ever build
one job's library.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from farm.queue.models import Attempt, TuneBuild, TuneTaskWork
from farm.queue.ops import TransactionOps
from farm.queue.states import AttemptState
from farm.queue.tuning import _insert
from farm.tuning.task_rows import DONE, QUEUED, TUNING, BuildClaim, TaskWork

# The rows' values are the tuning engine's (it reaches the rows through its
# TaskRows protocol, which this mixin provides); re-exported for the queue's users.
__all__ = ["DONE", "QUEUED", "TUNING", "BuildClaim", "TaskWork", "TaskWorkOps"]

def _of(row: TuneTaskWork) -> TaskWork:
    return TaskWork(row.shash, row.task, row.trials, row.position, row.trials_measured,
                    row.best_s, row.state, row.attempt_id, row.host)


def _gone(now: datetime) -> ColumnElement[bool]:
    """An attempt that no longer holds what it claimed: ended, or its lease ran out."""
    return or_(Attempt.state != AttemptState.RUNNING, Attempt.lease_expires_at < now)


def _dead_holder(session: Session, attempt_id: int, now: datetime) -> bool:
    """Whether ``attempt_id`` no longer runs (or is unknown)."""
    attempt = session.get(Attempt, attempt_id)
    return attempt is None or attempt.state is not AttemptState.RUNNING or (
        attempt.lease_expires_at < now)


class TaskWorkOps(TransactionOps):
    """Task work operations; mixed into Store, which provides ``_tx()``."""

    def add_task_work(self, job_id: int, tasks: Sequence[TaskWork], now: datetime) -> int:
        """Write a row per task not written yet (its trials kept as first written).

        Args:
            job_id: the tune job.
            tasks: its tasks in tuning order (``shash``, ``task``, ``trials`` are read).
            now: the time stored.

        Returns:
            Rows written (a racing writer's may have won some of them).

        Raises:
            StoreError: the database refused the write.
        """
        if not tasks:
            return 0
        with self._tx() as session:
            have = set(session.scalars(select(TuneTaskWork.shash).where(
                TuneTaskWork.job_id == job_id)))
            rows = [{"job_id": job_id, "shash": t.shash, "task": t.task, "position": i,
                     "trials": t.trials, "trials_measured": 0, "state": QUEUED,
                     "updated_at": now}
                    for i, t in enumerate(tasks) if t.shash not in have]
            if rows:  # a racing writer's rows win; its are the same tasks
                session.execute(_insert(session)(TuneTaskWork).values(rows).on_conflict_do_nothing(
                    index_elements=[TuneTaskWork.job_id, TuneTaskWork.shash]))
        return len(rows)

    def claim_task_work(self, job_id: int, attempt_id: int, host: str | None, now: datetime,
                        limit: int | None = None) -> list[TaskWork]:
        """Claim the job's claimable task rows for ``attempt_id``, in tuning order.

        Args:
            job_id: the tune job.
            attempt_id: the claiming attempt (a row it holds already is claimed again).
            host: its host id.
            now: the time: a holder whose lease ran out before it has lost its rows.
            limit: claim at most this many; None: all claimable.

        Returns:
            The rows now held by ``attempt_id`` (state ``tuning``), as claimed.

        Raises:
            StoreError: the database refused the claim.
        """
        with self._tx() as session:
            query = (select(TuneTaskWork).outerjoin(Attempt, Attempt.id == TuneTaskWork.attempt_id)
                     .where(TuneTaskWork.job_id == job_id, TuneTaskWork.state != DONE,
                            or_(TuneTaskWork.attempt_id.is_(None),
                                TuneTaskWork.attempt_id == attempt_id, _gone(now)))
                     .order_by(TuneTaskWork.position).limit(limit)
                     .with_for_update(skip_locked=True, of=TuneTaskWork))
            won = []
            for row in list(session.scalars(query)):
                held_by = row.attempt_id
                done = session.execute(
                    update(TuneTaskWork)
                    .where(TuneTaskWork.id == row.id, TuneTaskWork.state != DONE,
                           TuneTaskWork.attempt_id.is_(None) if held_by is None
                           else TuneTaskWork.attempt_id == held_by)
                    .values(attempt_id=attempt_id, host=host, state=TUNING, updated_at=now)
                    .execution_options(synchronize_session=False))
                if getattr(done, "rowcount", 1) == 1:  # else another claimer won the row
                    won.append(row.id)
            session.expire_all()
            return [_of(r) for r in session.scalars(select(TuneTaskWork).where(
                TuneTaskWork.id.in_(won)).order_by(TuneTaskWork.position))]

    def report_task_work(self, job_id: int, attempt_id: int, shash: str, trials_measured: int,
                         best_s: float | None, now: datetime) -> bool:
        """Record a held task's trials; at its budget it is done.

        Args:
            job_id: the tune job.
            shash: the task's workload (its row of the job).
            attempt_id: the reporting attempt; it must hold the row.
            trials_measured: trials measured so far (never lowered).
            best_s: the best measured mean run time in seconds; None: none yet.
            now: the time stored.

        Returns:
            False when ``attempt_id`` does not hold the row (another claimed it).

        Raises:
            StoreError: the database refused the write.
        """
        with self._tx() as session:
            row = session.scalars(select(TuneTaskWork).where(
                TuneTaskWork.job_id == job_id, TuneTaskWork.shash == shash,
                TuneTaskWork.attempt_id == attempt_id).with_for_update()).one_or_none()
            if row is None:
                return False
            row.trials_measured = max(row.trials_measured, trials_measured)
            if best_s is not None and best_s != float("inf"):
                row.best_s = best_s if row.best_s is None else min(row.best_s, best_s)
            row.state = DONE if row.trials_measured >= row.trials else row.state
            row.updated_at = now
        return True

    def busy_task_work(self, job_id: int, attempt_id: int, now: datetime) -> list[TaskWork]:
        """The job's rows another live attempt tunes now (not done), in tuning order.

        What ``attempt_id`` waits for before the job's build: a row whose
        holder stopped running (or whose lease ran out) is not busy but claimable.

        Args:
            job_id: the tune job.
            attempt_id: the asking attempt (its own rows are never busy).
            now: the time: a holder whose lease ran out before it is gone.

        Raises:
            StoreError: the database cannot be read.
        """
        with self._tx() as session:
            return [_of(r) for r in session.scalars(
                select(TuneTaskWork).join(Attempt, Attempt.id == TuneTaskWork.attempt_id)
                .where(TuneTaskWork.job_id == job_id, TuneTaskWork.state != DONE,
                       TuneTaskWork.attempt_id != attempt_id,
                       Attempt.state == AttemptState.RUNNING, Attempt.lease_expires_at >= now)
                .order_by(TuneTaskWork.position))]

    def close_task_work(self, job_id: int, attempt_id: int, now: datetime) -> int:
        """Mark the rows ``attempt_id`` holds done: it stopped tuning them (time or rounds out).

        Returns:
            Rows closed.

        Raises:
            StoreError: the database refused the write.
        """
        with self._tx() as session:
            done = session.execute(
                update(TuneTaskWork).where(TuneTaskWork.job_id == job_id,
                                           TuneTaskWork.attempt_id == attempt_id,
                                           TuneTaskWork.state != DONE)
                .values(state=DONE, updated_at=now).execution_options(synchronize_session=False))
            return max(0, getattr(done, "rowcount", 0))

    def task_work(self, job_id: int) -> list[TaskWork]:
        """The job's task rows in tuning order (empty: none written).

        Raises:
            StoreError: the database cannot be read.
        """
        with self._tx() as session:
            return [_of(r) for r in session.scalars(select(TuneTaskWork).where(
                TuneTaskWork.job_id == job_id).order_by(TuneTaskWork.position))]

    def tune_build(self, job_id: int) -> tuple[int, str | None, datetime | None] | None:
        """The job's build row: ``(attempt_id, host, built_at)``; None before one claimed it.

        Raises:
            StoreError: the database cannot be read.
        """
        with self._tx() as session:
            build = session.get(TuneBuild, job_id)
            return None if build is None else (build.attempt_id, build.host, build.built_at)

    def claim_tune_build(self, job_id: int, attempt_id: int, host: str | None,
                         now: datetime) -> BuildClaim:
        """Claim the job's one tuned build for ``attempt_id`` once every task row is done.

        Raises:
            StoreError: the database refused the claim.
        """
        with self._tx() as session:
            left = session.scalars(select(TuneTaskWork.id).where(
                TuneTaskWork.job_id == job_id, TuneTaskWork.state != DONE).limit(1)).first()
            if left is not None:
                return BuildClaim.TASKS_LEFT
            session.execute(_insert(session)(TuneBuild).values(
                job_id=job_id, attempt_id=attempt_id, host=host, claimed_at=now,
            ).on_conflict_do_nothing(index_elements=[TuneBuild.job_id]))
            build = session.scalars(select(TuneBuild).where(TuneBuild.job_id == job_id)
                                    .with_for_update()).one()
            made = BuildClaim.BUILT if build.built_at is not None else None
            if build.attempt_id == attempt_id:
                return made or BuildClaim.BUILD
            if not _dead_holder(session, build.attempt_id, now):
                return made or BuildClaim.HELD
            taken = session.execute(  # its library went with it: build again
                update(TuneBuild).where(TuneBuild.job_id == job_id,
                                        TuneBuild.attempt_id == build.attempt_id)
                .values(attempt_id=attempt_id, host=host, claimed_at=now, built_at=None)
                .execution_options(synchronize_session=False))
            return BuildClaim.BUILD if getattr(taken, "rowcount", 1) == 1 else BuildClaim.HELD

    def finish_tune_build(self, job_id: int, attempt_id: int, now: datetime) -> bool:
        """Mark the job's build made; False when ``attempt_id`` does not hold it.

        Raises:
            StoreError: the database refused the write.
        """
        with self._tx() as session:
            done = session.execute(
                update(TuneBuild).where(TuneBuild.job_id == job_id,
                                        TuneBuild.attempt_id == attempt_id,
                                        TuneBuild.built_at.is_(None))
                .values(built_at=now).execution_options(synchronize_session=False))
            return getattr(done, "rowcount", 1) == 1
