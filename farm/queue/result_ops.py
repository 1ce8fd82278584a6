"""The results of :class:`farm.queue.store.Store`: results with their samples, snapshots, records.

A result is written exactly once, by :meth:`farm.queue.attempt_ops.AttemptOps.finish`;
this facade reads what a job left: its result and raw samples, the phone
states taken before its measured runs, a tune job's tuning records.
"""

from __future__ import annotations

from sqlalchemy import func, select

from farm.queue.models import Attempt, DeviceSnapshot, Result, Sample, TuningRecord
from farm.queue.ops import TransactionOps
from farm.queue.records import ResultView, SnapshotData, TuningData

__all__ = ["ResultOps"]


class ResultOps(TransactionOps):
    """Result reads; mixed into Store, which provides ``_tx()``."""

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
