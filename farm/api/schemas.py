"""The JSON shapes of ``/api/v1/...``: pydantic models, nesting the store's frozen views.

Datetimes are ISO 8601 with their UTC offset; states and health are their
string values; temperatures are °C, battery in percent (0..100), thermal
status Android's ``PowerManager.THERMAL_STATUS_*`` (0 none .. 6 shutdown).
The dashboard's pages and ``farmctl --server`` read these same shapes: keep
them stable (add fields; never rename).
"""

from __future__ import annotations

from dataclasses import asdict, fields
from datetime import datetime
from typing import Any

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from farm.api.listings import workload_of
from farm.health.readings import own_keys, shown
from farm.queue.hosts import HostRecord, readings_stale, stale_health_reason
from farm.queue.models import DeviceHealth, DeviceState, JobState
from farm.queue.records import AttemptView, DeviceRecord, EventRecord, JobView, ResultView
from farm.queue.reservations import ReservationView
from farm.results.pairing import result_columns
from farm.results.rows import SampleRow
from farm.results.spreads import PhoneSpread
from farm.tuning import TuneCounters

__all__ = ["DeviceDetailOut", "DeviceOut", "ErrorOut", "HostOut", "JobDetailOut", "JobOut",
           "ReserveIn", "ResultsOut", "SubmitIn", "SubmittedOut", "TuningOut", "device_out",
           "job_out", "record_of", "tuning_out"]


def readable_job(data: Any) -> Any:
    """A job's JSON whose state this farm does not know (a newer server's) read as unknown.

    ``{"state": "paused", ...}`` becomes ``{"state": "unknown", "unknown_state":
    "paused", ...}``, as :class:`~farm.queue.records.JobView` reads such a row from
    the database, so ``farmctl --server`` shows ``paused (unknown)`` instead of
    refusing the answer's shape. Anything else is given back as it is.
    """
    state = data.get("state") if isinstance(data, dict) else None
    if isinstance(state, str) and state not in JobState._value2member_map_:
        return {**data, "state": JobState.UNKNOWN.value, "unknown_state": state}
    return data


class ErrorOut(BaseModel):
    """Every refusal: ``{"error": "<one line>"}``; a spec error names its field too."""

    error: str
    field: str | None = None
    reason: str | None = None


class DeviceOut(BaseModel):
    """One phone as ``GET /api/v1/devices`` lists it.

    ``host`` is the farmd host that sees it (None before a host claimed it),
    ``unreachable`` whether that host's heartbeat is older than ``hosts.dead_after_s``;
    ``kind`` is ``android``, ``board`` or ``gpu``; ``job_id`` is the job of the
    attempt it runs; ``reservation`` is its active reservation, if any.
    ``stale``: the phone is offline or unreachable, so ``health`` is ``unknown``
    (the last judgement stays in ``health_reason``) and the readings are its
    last ones, taken at ``sampled_at``. ``readings`` are the latest sample's
    readings by name as the device's kind declares them, ``values`` the same
    with units (``[{"name", "value", "unit", "description"}]``); each reading
    declared ``own_key`` (a phone's battery %, battery °C and thermal status:
    API clients read them since before readings were declared per kind) is
    also a key of its own (:func:`farm.health.readings.own_keys`), None where
    the latest sample lacks it.
    """

    serial: str
    state: DeviceState
    health: DeviceHealth
    health_reason: str = ""
    drained: bool
    held_outside: str | None = None
    host: str | None = None
    unreachable: bool = False
    kind: str = "android"
    facts: dict[str, Any] = Field(default_factory=dict)
    readings: dict[str, float] = Field(default_factory=dict)
    values: list[dict[str, Any]] = Field(default_factory=list)
    sampled_at: datetime | None = None
    last_seen: datetime | None = None
    state_changed_at: datetime | None = None
    attempt_id: int | None = None
    job_id: int | None = None
    reservation: ReservationView | None = None
    stale: bool = False

    @model_serializer(mode="wrap")
    def _own_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The fields, and each reading declared ``own_key`` under its name."""
        data: dict[str, Any] = handler(self)
        return {**data, **own_keys(self.readings)}

    @field_validator("state", mode="before")
    @classmethod
    def _readable_state(cls, value: Any) -> Any:
        """A state this farm does not know (a newer server's) reads as ``unknown``.

        As such a row does from the database (:mod:`farm.queue.tolerant`).
        """
        if isinstance(value, str) and value not in DeviceState._value2member_map_:
            return DeviceState.UNKNOWN.value
        return value


class DeviceDetailOut(DeviceOut):
    """One phone with its recent state changes and recovery steps, newest first."""

    events: list[EventRecord] = Field(default_factory=list)


def device_out(record: DeviceRecord, job_id: int | None = None,
               reservation: ReservationView | None = None,
               dead_hosts: frozenset[str] = frozenset()) -> DeviceOut:
    """A store record as its JSON shape."""
    data = asdict(record)
    data["facts"] = dict(record.facts)
    data["readings"] = dict(record.readings)
    data["values"] = shown(record.kind, record.readings)
    stale = readings_stale(record, dead_hosts)
    if stale:
        data["health_reason"] = stale_health_reason(record)
        data["health"] = DeviceHealth.UNKNOWN
    return DeviceOut(**data, job_id=job_id, reservation=reservation, stale=stale,
                     unreachable=record.host is not None and record.host in dead_hosts)



def record_of(out: DeviceOut) -> DeviceRecord:
    """The store record back from its JSON shape (``farmctl --server``)."""
    data = out.model_dump()
    return DeviceRecord(**{f.name: data[f.name] for f in fields(DeviceRecord) if f.name in data})


class JobOut(BaseModel):
    """One job as ``GET /api/v1/jobs`` lists it, with why it waits if it is queued.

    ``workload``: what it measures or tunes, e.g. ``gemm n=512 float32`` or
    ``model small_cnn.onnx`` (its kind's label, :attr:`farm.kinds.base.Kind.workload`).
    """

    job: JobView
    waiting: str | None = None
    workload: str | None = None

    @field_validator("job", mode="before")
    @classmethod
    def _readable_job(cls, value: Any) -> Any:
        """The job as :func:`readable_job` reads it."""
        return readable_job(value)


class TuningOut(BaseModel):
    """A tuning job's progress (:class:`farm.tuning.counters.TuneCounters`) and totals."""

    counters: dict[str, Any]
    tasks_done: int
    trials_asked: int
    trials_measured: int


def tuning_out(counters: TuneCounters | None) -> TuningOut | None:
    """The JSON shape of a tuning job's counters (None for other jobs)."""
    if counters is None:
        return None
    return TuningOut(counters=counters.to_dict(), tasks_done=counters.tasks_done,
                     trials_asked=counters.trials_asked,
                     trials_measured=counters.trials_measured)


class JobDetailOut(BaseModel):
    """One job: its spec and state, why it waits, its attempts, result and tuning progress."""

    job: JobView
    waiting: str | None = None
    attempts: list[AttemptView] = Field(default_factory=list)
    result: ResultView | None = None
    tuning: TuningOut | None = None

    @field_validator("job", mode="before")
    @classmethod
    def _readable_job(cls, value: Any) -> Any:
        """The job as :func:`readable_job` reads it."""
        return readable_job(value)


def job_out(view: JobView, waiting: dict[int, str]) -> JobOut:
    """A job with its wait reason from ``waiting`` (job id -> reason) and its workload."""
    return JobOut(job=view, waiting=waiting.get(view.id), workload=workload_of(view))


class ResultsOut(BaseModel):
    """A job's results: per phone spread (never pooled) and the raw samples.

    ``samples`` are the rows of ``farmctl results --format json``; ``readings``
    the readings both carry as keys of their own, with their headings
    (:func:`farm.results.pairing.result_columns`).
    """

    spreads: list[PhoneSpread]
    samples: list[SampleRow]
    readings: list[dict[str, Any]] = Field(default_factory=result_columns)


class SubmitIn(BaseModel):
    """``POST /api/v1/jobs``: a job spec (as ``farmctl enqueue`` builds it) and how to queue it.

    ``each``: one job per phone in service that fits, under one run id.
    ``wait_for_device``: queue it even if no known phone can run it.
    """

    spec: dict[str, Any]
    each: bool = False
    wait_for_device: bool = False


class SubmittedOut(BaseModel):
    """The jobs an enqueue stored (one, or a fan-out's) and the run id of a fan-out.

    ``skipped``: the fitting phones a fan-out queued nothing on, each with why
    (a reservation in force).
    """

    jobs: list[JobView]
    run_id: str | None = None
    skipped: list[str] = Field(default_factory=list)

    @field_validator("jobs", mode="before")
    @classmethod
    def _readable_jobs(cls, value: Any) -> Any:
        """Each job as :func:`readable_job` reads it."""
        return [readable_job(job) for job in value] if isinstance(value, list) else value


class ReserveIn(BaseModel):
    """``POST /api/v1/reservations``: a serial, or a selection to pick a free phone by.

    ``for_s``: how long, in seconds (at most ``reservations.max_for_s``).
    """

    serial: str | None = None
    abi: str | None = None
    soc: str | None = None
    gpu: str | None = None
    sdk_min: int | None = Field(default=None, ge=1, le=1000)
    for_s: float = Field(gt=0)


class HostOut(BaseModel):
    """A farmd host sharing the database, and whether it beat within ``hosts.dead_after_s``."""

    host: HostRecord
    alive: bool
