"""The store half of the regression watch: earlier runs of a spec and the ``regressions`` table.

Mixed into :class:`farm.queue.store.Store` (which provides ``_tx()``), as
:class:`farm.queue.devices.DeviceOps` is; :mod:`farm.results.compare` and the
regression watch (:mod:`farm.results.watch`) read and write through it.

A verdict is written once per job: :meth:`RegressionOps.record_regressions`
locks the job's row and writes only while the job has no verdict rows, so two
farmd sharing one database cannot record one job twice. A ``suspected``
verdict waits for the A/B job that settles it: :meth:`RegressionOps.attach_confirmation`
names that job once, and :meth:`RegressionOps.settle_regression` moves the
row to its final verdict only while it is still ``suspected`` (compare and set).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import exists, select, update

from farm.queue.models import Job, JobState, Regression
from farm.queue.ops import TransactionOps
from farm.queue.records import JobView

__all__ = ["SUSPECTED", "RegressionOps", "RegressionView"]


@dataclass(frozen=True)
class RegressionView:
    """One phone's verdict of a job against its baseline (a ``regressions`` row).

    ``ratio`` is the job's median timing over the baseline's (above 1: slower),
    ``ci_low``/``ci_high`` its bootstrap 95% interval, ``p_value`` the
    Mann-Whitney U test's; ``verdict`` is ``slower``, ``faster``, ``no change`` or
    ``undecided`` (:func:`farm.stats.compare_samples`); ``suspected`` while
    the A/B job ``confirm_job_id`` settles it, and after it ``phone`` when
    that job found no change between the builds (the phone's speed moved).
    """

    id: int
    job_id: int
    baseline_job_id: int
    serial: str
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str
    created_at: datetime
    confirm_job_id: int | None = None

    @classmethod
    def of(cls, r: Regression) -> RegressionView:
        """The view of a row."""
        return cls(r.id, r.job_id, r.baseline_job_id, r.serial, r.ratio, r.ci_low, r.ci_high,
                   r.p_value, r.verdict, r.created_at, r.confirm_job_id)


#: A verdict the regression watch waits to settle with an A/B job.
SUSPECTED = "suspected"


class RegressionOps(TransactionOps):
    """Reads for comparisons and the regressions table; mixed into Store."""


    def earlier_jobs(self, job: JobView, limit: int) -> list[JobView]:
        """Succeeded jobs of ``job``'s kind and spec that finished before it, newest first.

        A schedule enqueues the same spec every time, so these are its earlier
        runs (and any run a person enqueued by hand with the same spec).
        Only the newest ``limit`` jobs of the kind are looked at.
        """
        if job.finished_at is None:
            return []
        query = (
            select(Job)
            .where(Job.kind == job.kind, Job.state == JobState.SUCCEEDED, Job.id != job.id,
                   Job.finished_at < job.finished_at)
            .order_by(Job.finished_at.desc(), Job.id.desc())
            .limit(limit)
        )
        with self._tx() as session:
            return [JobView.of(j) for j in session.scalars(query) if dict(j.spec) == job.spec]

    def unjudged_jobs(self, kind_specs: Sequence[tuple[str, dict[str, object]]],
                      since: datetime) -> list[JobView]:
        """Succeeded jobs with no verdict rows yet, oldest first.

        Only jobs that finished at or after ``since`` and whose kind and spec
        are one of ``kind_specs`` (a watched schedule's) are returned.
        """
        judged = exists().where(Regression.job_id == Job.id)
        kinds = sorted({kind for kind, _ in kind_specs})
        query = (
            select(Job)
            .where(Job.state == JobState.SUCCEEDED, Job.finished_at >= since,
                   Job.kind.in_(kinds), ~judged)
            .order_by(Job.finished_at, Job.id)
        )
        with self._tx() as session:
            return [JobView.of(j) for j in session.scalars(query)
                    if (j.kind, dict(j.spec)) in kind_specs]

    def record_regressions(self, job_id: int, rows: Sequence[RegressionView]) -> bool:
        """Write a job's verdicts (``id`` of each row is ignored), once.

        The job's row is locked (PostgreSQL ``FOR UPDATE``; SQLite has one
        writer), then the rows are written only if the job has none yet.

        Returns:
            False when the job already had verdicts (nothing written).
        """
        with self._tx() as session:
            session.scalars(select(Job.id).where(Job.id == job_id).with_for_update()).one()
            if session.scalar(select(exists().where(Regression.job_id == job_id))):
                return False
            session.add_all(
                Regression(job_id=job_id, baseline_job_id=r.baseline_job_id, serial=r.serial,
                           ratio=r.ratio, ci_low=r.ci_low, ci_high=r.ci_high,
                           p_value=r.p_value, verdict=r.verdict, created_at=r.created_at,
                           confirm_job_id=r.confirm_job_id)
                for r in rows
            )
            return True

    def suspected_regressions(self) -> list[RegressionView]:
        """Rows still ``suspected``, oldest first: the watch's A/B jobs to enqueue or read."""
        query = select(Regression).where(Regression.verdict == SUSPECTED).order_by(Regression.id)
        with self._tx() as session:
            return [RegressionView.of(r) for r in session.scalars(query)]

    def attach_confirmation(self, row_id: int, job_id: int) -> bool:
        """Name the A/B job that settles a suspected row, if none is named yet (compare and set).

        Returns:
            False when the row is no longer suspected or already names a job.
        """
        with self._tx() as session:
            done = session.execute(
                update(Regression)
                .where(Regression.id == row_id, Regression.verdict == SUSPECTED,
                       Regression.confirm_job_id.is_(None))
                .values(confirm_job_id=job_id))
            return bool(getattr(done, "rowcount", 0))

    def settle_regression(self, row_id: int, verdict: str) -> bool:
        """Move a suspected row to its final ``verdict`` (compare and set on ``suspected``).

        Returns:
            False when another farmd settled it first (nothing written).
        """
        with self._tx() as session:
            done = session.execute(
                update(Regression)
                .where(Regression.id == row_id, Regression.verdict == SUSPECTED)
                .values(verdict=verdict))
            return bool(getattr(done, "rowcount", 0))

    def regressions(self, *, slower_only: bool = False, limit: int = 100) -> list[RegressionView]:
        """Verdict rows, newest first; only ``slower`` ones if ``slower_only``."""
        query = select(Regression).order_by(Regression.id.desc()).limit(limit)
        if slower_only:
            query = query.where(Regression.verdict == "slower")
        with self._tx() as session:
            return [RegressionView.of(r) for r in session.scalars(query)]
