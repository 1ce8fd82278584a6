"""The queue's tables, as SQLAlchemy 2 typed ORM classes.

Everything the farm knows lives here, so ``farmd`` can be killed at any moment
and pick up where it stopped (LAVA keeps all scheduler state in the database for
the same reason)::

    Host ──< Device (by ``devices.host``)   the farmd whose adb server sees it
    Device ──< DeviceEvent          state changes, each with its reason
           ──< HealthSample         one probe of the phone
    Device ──< PhoneHold >── Attempt  one row per phone a running attempt holds
    Job ──< Attempt ──< DeviceSnapshot   the phone's state when a number was taken
        └── Result (one per job) ──< Sample   every raw timing, in seconds
        └──< TuningRecord >── TuningWorkload   the fleet's tuning records
    Device ──< Reservation          a person's hold on a phone, until it expires
    ApiToken                        the HTTP API's tokens, hashed
    Blob                            job inputs (model files) by SHA-256

A phone's ``state`` (what it is doing) is kept apart from its ``health`` (whether
it can be trusted), as LAVA's ``Device.state``/``Device.health`` are. States are
``str`` enums, as rq's ``JobStatus``, so rows and logs read as words.

All datetimes are timezone-aware UTC in Python (:class:`UtcDateTime`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, column_property, mapped_column
from sqlalchemy.types import TypeDecorator

from farm.queue.limits import DB_INT_MAX
from farm.queue.states import AttemptState, DeviceHealth, DeviceState, JobState
from farm.queue.tolerant import TolerantEnum

__all__ = [
    "DB_INT_MAX",
    "LEGACY_READINGS",
    "ApiToken",
    "Attempt",
    "AttemptState",
    "Base",
    "Blob",
    "Device",
    "DeviceEvent",
    "DeviceHealth",
    "DeviceSnapshot",
    "DeviceState",
    "HealthSample",
    "Host",
    "Job",
    "JobState",
    "PhoneHold",
    "Reservation",
    "Result",
    "Sample",
    "TuningRecord",
    "TuningWorkload",
    "UtcDateTime",
    "readings_of",
]



def _enum(cls: type[Enum]) -> sa.Enum:
    """A portable VARCHAR column holding the enum's values (not its names)."""
    return sa.Enum(
        cls,
        native_enum=False,
        length=16,
        values_callable=lambda members: [m.value for m in members],
        validate_strings=True,
    )


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every backend.

    SQLite has no time zones: values are stored as naive UTC and given back
    ``tzinfo=UTC``; PostgreSQL's ``timestamptz`` keeps them natively. A naive
    datetime passed in is a bug (whose clock?), so it is refused.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        """An aware datetime as stored: UTC, naive on SQLite (which keeps no offset).

        Raises:
            ValueError: ``value`` is naive.
        """
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(
        self, value: datetime | None, _dialect: sa.Dialect
    ) -> datetime | None:
        """A stored datetime as an aware UTC one (a naive one is read as UTC)."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base; JSON columns map ``dict``/``list``."""

    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: sa.JSON,
        list[str]: sa.JSON,
        datetime: UtcDateTime,
    }


class Host(Base):
    """One farmd host sharing the database (``Settings.host_id``).

    A host whose ``heartbeat_at`` is older than ``hosts.dead_after_s`` is dead:
    its devices show as unreachable and its attempts' leases run out.
    """

    __tablename__ = "hosts"

    host_id: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    started_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    # The tracker its devices register with, as users reach it.
    tracker_host: Mapped[str] = mapped_column(sa.String(255))
    tracker_port: Mapped[int]
    info: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The newest migration its farm knows, and its farm.__version__ (rolling upgrades).
    schema_revision: Mapped[str | None] = mapped_column(sa.String(32), default=None)
    code_version: Mapped[str | None] = mapped_column(sa.String(64), default=None)


class Device(Base):
    """One device, by serial (adb serial for phones, a configured name for boards)."""

    __tablename__ = "devices"

    serial: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    # The host whose farmd sees this device; only it sweeps, provisions and runs it.
    host: Mapped[str | None] = mapped_column(sa.String(128), default=None, index=True)
    # The device kind (farm.controllers registry): "android", "board", "gpu".
    kind: Mapped[str] = mapped_column(sa.String(16), default="android",
                                      server_default="android")
    state: Mapped[DeviceState] = mapped_column(TolerantEnum(DeviceState, DeviceState.UNKNOWN),
                                               default=DeviceState.DISCOVERED)
    health: Mapped[DeviceHealth] = mapped_column(_enum(DeviceHealth), default=DeviceHealth.UNKNOWN)
    health_reason: Mapped[str] = mapped_column(sa.Text, default="", server_default="")
    # abi, abis, soc, sdk, gpu, model...: what DeviceSelection matches against.
    facts: Mapped[dict[str, Any]] = mapped_column(default=dict)
    drained: Mapped[bool] = mapped_column(default=False)
    attempt_id: Mapped[int | None] = mapped_column(default=None)  # set while busy
    last_seen: Mapped[datetime | None] = mapped_column(default=None)
    state_changed_at: Mapped[datetime | None] = mapped_column(default=None)
    # Why a session farm did not open holds this phone (a person's own
    # ``request(key)`` seen in the tracker's summary), or None; jobs wait.
    held_outside: Mapped[str | None] = mapped_column(sa.Text, default=None)
    # Desired state: the tracker key the device's hold asks it to serve (a
    # tuning job's key); None: its own key. Cleared when it leaves busy.
    serve_key: Mapped[str | None] = mapped_column(sa.String(128), default=None)
    # Observed state: the key farmd last started the device's RPC server under.
    serving_key: Mapped[str | None] = mapped_column(sa.String(128), default=None)


class DeviceEvent(Base):
    """One state change of a phone, e.g. ``ready -> cooling (battery_temp_c 41.2 > 35)``."""

    __tablename__ = "device_events"
    __table_args__ = (sa.Index("ix_device_events_serial_at", "serial", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[str] = mapped_column(sa.String(128))
    at: Mapped[datetime]
    from_state: Mapped[str | None] = mapped_column(sa.String(16))
    to_state: Mapped[str] = mapped_column(sa.String(16))
    reason: Mapped[str] = mapped_column(sa.Text, default="")


class HealthSample(Base):
    """One health probe of a device; None where the probe could not read a value.

    ``readings`` holds the readings the device's kind declares, by name
    (:mod:`farm.health.readings`). The per-reading columns before it are a
    phone's readings, still written for hosts before migration 0009 and read
    where ``readings`` is NULL (a row such a host wrote).
    """

    __tablename__ = "health_samples"
    __table_args__ = (sa.Index("ix_health_samples_serial_at", "serial", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[str] = mapped_column(sa.String(128))
    at: Mapped[datetime]
    battery_pct: Mapped[float | None]
    battery_temp_c: Mapped[float | None]
    thermal_status: Mapped[int | None]  # PowerManager THERMAL_STATUS_*: 0 none .. 6 shutdown
    max_zone_temp_c: Mapped[float | None]
    free_storage_mb: Mapped[float | None]
    screen_on: Mapped[bool | None]
    app_running: Mapped[bool | None]
    registered: Mapped[bool | None]  # the RPC app is registered with the tracker
    readings: Mapped[dict[str, Any] | None]  # {name: value} as the kind declares them


#: A phone's readings that still have a column each (migration 0009 keeps them
#: for hosts that predate ``health_samples.readings``): written beside the JSON,
#: read where a row has no JSON.
LEGACY_READINGS = ("battery_pct", "battery_temp_c", "thermal_status", "max_zone_temp_c",
                   "free_storage_mb")


def readings_of(sample: HealthSample) -> dict[str, float]:
    """A stored sample's readings: its JSON, or a pre-0009 host's per-reading columns."""
    if sample.readings is not None:
        return {name: value for name, value in sample.readings.items() if value is not None}
    return {name: value for name in LEGACY_READINGS
            if (value := getattr(sample, name)) is not None}


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
    state: Mapped[AttemptState] = mapped_column(_enum(AttemptState), default=AttemptState.RUNNING)
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


class Reservation(Base):
    """A device taken out of scheduling for a person until ``expires_at``.

    Active while ``ended_at`` is NULL; the partial unique index allows one
    active reservation per device whatever two racing writers read.
    """

    __tablename__ = "reservations"
    __table_args__ = (
        sa.Index("ux_reservations_active_serial", "serial", unique=True,
                 sqlite_where=sa.text("ended_at IS NULL"),
                 postgresql_where=sa.text("ended_at IS NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    serial: Mapped[str] = mapped_column(sa.ForeignKey("devices.serial"))
    owner: Mapped[str] = mapped_column(sa.String(128))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    ended_at: Mapped[datetime | None] = mapped_column(default=None)
    end_reason: Mapped[str | None] = mapped_column(sa.Text, default=None)


class ApiToken(Base):
    """An HTTP API token; only its SHA-256 is stored, never the token."""

    __tablename__ = "api_tokens"
    __table_args__ = (sa.UniqueConstraint("token_sha256", name="uq_api_tokens_token_sha256"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(sa.String(128))
    token_sha256: Mapped[str] = mapped_column(sa.String(64))
    # Operators may drain, undrain and release any device.
    operator: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class Blob(Base):
    """A job input (a model file) by the SHA-256 of its bytes; never changed once written."""

    __tablename__ = "blobs"

    sha256: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    size: Mapped[int] = mapped_column(sa.BigInteger)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)
    created_at: Mapped[datetime]
