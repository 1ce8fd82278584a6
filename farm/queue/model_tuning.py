"""The tuning tables: the fleet's tuning records, a model tune's task rows and its one build."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from farm.queue.model_base import Base


class TuningWorkload(Base):
    """A MetaSchedule workload (a line of its ``database_workload.json``) the fleet tuned."""

    __tablename__ = "tuning_workloads"

    id: Mapped[int] = mapped_column(primary_key=True)
    shash: Mapped[str] = mapped_column(sa.String(32), unique=True)  # MetaSchedule's structural hash
    module: Mapped[str] = mapped_column(sa.Text)  # its JSON form, base64, as the file holds it
    created_at: Mapped[datetime]


class TuningRecord(Base):
    """One MetaSchedule tuning record (JSON) a tune job measured, or one imported.

    Rows with a ``workload_id`` are the fleet's records (:mod:`farm.queue.tuning`):
    one per trace, workload, target and device model (``record_key``), served
    best ``run_s`` first to later tunings of the same device model.
    """

    __tablename__ = "tuning_records"
    __table_args__ = (
        sa.Index("ix_tuning_records_best", "workload_id", "device_model", "run_s"),
        sa.Index("ux_tuning_records_record_key", "record_key", unique=True),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int | None] = mapped_column(sa.ForeignKey("jobs.id"), index=True)
    attempt_id: Mapped[int | None] = mapped_column(sa.ForeignKey("attempts.id"))
    workload: Mapped[str] = mapped_column(sa.Text)  # a label, e.g. "tune model m.onnx fused_..."
    target: Mapped[str] = mapped_column(sa.Text)
    record: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]
    workload_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("tuning_workloads.id", name="fk_tuning_records_workload_id"))
    device_model: Mapped[str | None] = mapped_column(sa.String(128))
    run_s: Mapped[float | None]  # mean of the record's run times; None: the measurement failed
    record_key: Mapped[str | None] = mapped_column(sa.String(64))


class TuneTaskWork(Base):
    """One task of a model tune job: its trials budget and which attempt tunes it.

    One row per job and workload (``shash``); :mod:`farm.queue.task_work`
    says who may claim it. ``attempt_id`` is the attempt that claimed it last:
    its lease is the task's lease (a row whose attempt no longer runs is
    claimable again).
    """

    __tablename__ = "tune_task_work"
    __table_args__ = (sa.UniqueConstraint("job_id", "shash", name="ux_tune_task_work_job_shash"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id"), index=True)
    shash: Mapped[str] = mapped_column(sa.String(32))  # MetaSchedule's structural hash
    task: Mapped[str] = mapped_column(sa.String(255))  # MetaSchedule's task name
    position: Mapped[int]  # the task's place in tuning order (heaviest first)
    trials: Mapped[int]  # measured trials asked
    trials_measured: Mapped[int] = mapped_column(default=0)
    best_s: Mapped[float | None] = mapped_column(default=None)
    state: Mapped[str] = mapped_column(sa.String(16), default="queued")  # queued|tuning|done
    attempt_id: Mapped[int | None] = mapped_column(sa.ForeignKey("attempts.id"), default=None)
    host: Mapped[str | None] = mapped_column(sa.String(128), default=None)
    updated_at: Mapped[datetime]


class TuneBuild(Base):
    """The one build of a model tune job's tuned library: whoever holds this row builds.

    ``job_id`` is the primary key, so two hosts can never both hold it;
    ``built_at`` is set once the build is made.
    """

    __tablename__ = "tune_builds"

    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id"), primary_key=True)
    attempt_id: Mapped[int] = mapped_column(sa.ForeignKey("attempts.id"))
    host: Mapped[str | None] = mapped_column(sa.String(128), default=None)
    claimed_at: Mapped[datetime]
    built_at: Mapped[datetime | None] = mapped_column(default=None)
