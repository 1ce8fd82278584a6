"""The jobs' tables: jobs, their attempts and phone holds, results and samples, regressions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, column_property, mapped_column

from farm.queue.model_base import Base, enum_column
from farm.queue.states import AttemptState, JobState
from farm.queue.tolerant import TolerantEnum


class Job(Base):
    """A validated spec and where it is in its life."""

    __tablename__ = "jobs"
    __table_args__ = (sa.Index("ix_jobs_state_priority", "state", "priority"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(16))
    spec: Mapped[dict[str, Any]]
    state: Mapped[JobState] = mapped_column(TolerantEnum(JobState, JobState.UNKNOWN),
                                            default=JobState.QUEUED)
    # The same column as written, read-only: what a state this farm reads as
    # ``unknown`` is (a newer farm's, e.g. ``paused``), so it can be shown.
    stored_state: Mapped[str] = column_property(sa.type_coerce(state, sa.String(16)))
    priority: Mapped[int] = mapped_column(default=0)
    submitted_at: Mapped[datetime]
    not_before: Mapped[datetime | None] = mapped_column(default=None)
    attempts_max: Mapped[int]
    attempts_made: Mapped[int] = mapped_column(default=0)
    timeout_s: Mapped[float]
    # Phones that failed this job; the scheduler offers it others first.
    excluded_serials: Mapped[list[str]] = mapped_column(default=list)
    # Set when a failed attempt is retried after a backoff; apart from
    # not_before so the job keeps the priority it earned by waiting.
    retry_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    error: Mapped[str | None] = mapped_column(sa.Text, default=None)
    # Jobs fanned out by one ``enqueue --each`` (one per phone) share a run id.
    run_id: Mapped[str | None] = mapped_column(sa.String(32), default=None, index=True)
    # Who enqueued it: the API token's owner; None from the local CLI.
    owner: Mapped[str | None] = mapped_column(sa.String(128), default=None)


class Attempt(Base):
    """One try of a job on a set of phones, held by a lease."""

    __tablename__ = "attempts"
    __table_args__ = (sa.Index("ix_attempts_state_lease", "state", "lease_expires_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id"), index=True)
    serials: Mapped[list[str]]
    state: Mapped[AttemptState] = mapped_column(enum_column(AttemptState),
                                                default=AttemptState.RUNNING)
    lease_s: Mapped[float]
    lease_expires_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    error_kind: Mapped[str | None] = mapped_column(sa.String(64), default=None)
    error: Mapped[str | None] = mapped_column(sa.Text, default=None)
    # The host id of the farmd running it (``Settings.host_id``): a farmd that
    # restarts on the same host reclaims these at once instead of waiting out
    # their leases.
    host: Mapped[str | None] = mapped_column(sa.String(128), default=None)
    # A helper attempt (farm.queue.helpers): it tunes a running job's free task
    # rows on another host; its end never changes the job.
    helper: Mapped[bool] = mapped_column(default=False, server_default=sa.false())


class PhoneHold(Base):
    """A phone held by a running attempt.

    ``serial`` is the primary key: the database refuses a second running
    attempt on one phone, whatever a racing writer read. A row is written when
    an attempt claims the phone and deleted when the attempt releases it.
    """

    __tablename__ = "phone_holds"

    serial: Mapped[str] = mapped_column(sa.ForeignKey("devices.serial"), primary_key=True)
    attempt_id: Mapped[int] = mapped_column(sa.ForeignKey("attempts.id"), index=True)
    at: Mapped[datetime]


class Result(Base):
    """The one result of a job; the unique ``job_id`` makes a second commit impossible."""

    __tablename__ = "results"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id"), unique=True)
    attempt_id: Mapped[int] = mapped_column(sa.ForeignKey("attempts.id"))
    summary: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]


class Sample(Base):
    """One raw measurement of a result (a timed repeat), kept so numbers can be re-judged."""

    __tablename__ = "samples"

    result_id: Mapped[int] = mapped_column(sa.ForeignKey("results.id"), primary_key=True)
    index: Mapped[int] = mapped_column(primary_key=True)
    value: Mapped[float]  # in ``unit``; seconds for timings
    unit: Mapped[str] = mapped_column(sa.String(16), default="s")
    serial: Mapped[str | None] = mapped_column(sa.String(128), default=None)
    # 0 for the first measured run; 1 for a noisy result's one re-run.
    repetition: Mapped[int] = mapped_column(default=0, server_default="0")
    # An A/B job's build ("a" or "b") and round (from 0, per phone); NULL for other kinds.
    arm: Mapped[str | None] = mapped_column(sa.String(1), default=None)
    round: Mapped[int | None] = mapped_column(default=None)


class DeviceSnapshot(Base):
    """A phone's state just before a measured run: what the number means."""

    __tablename__ = "device_snapshots"

    id: Mapped[int] = mapped_column(primary_key=True)
    attempt_id: Mapped[int] = mapped_column(sa.ForeignKey("attempts.id"), index=True)
    serial: Mapped[str] = mapped_column(sa.String(128))
    at: Mapped[datetime]
    battery: Mapped[dict[str, Any]] = mapped_column(default=dict)
    thermal: Mapped[dict[str, Any]] = mapped_column(default=dict)
    facts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    thermal_wait_s: Mapped[float] = mapped_column(default=0.0)  # thermal gating wait


class Regression(Base):
    """One phone's verdict when a result was compared with its baseline (regression watch)."""

    __tablename__ = "regressions"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id"), index=True)
    baseline_job_id: Mapped[int] = mapped_column(sa.ForeignKey("jobs.id"))
    serial: Mapped[str] = mapped_column(sa.String(128))
    ratio: Mapped[float]  # median of the job over median of the baseline (timings: >1 slower)
    ci_low: Mapped[float]
    ci_high: Mapped[float]
    p_value: Mapped[float]
    # slower|faster|no change|undecided, suspected while an A/B job settles it, or
    # phone: the A/B said no change, so the phone's speed moved, not the build's.
    verdict: Mapped[str] = mapped_column(sa.String(16))
    created_at: Mapped[datetime]
    confirm_job_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("jobs.id", name="fk_regressions_confirm_job_id_jobs"), default=None)
