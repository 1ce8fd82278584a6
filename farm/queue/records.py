"""Plain, frozen values that cross the :class:`~farm.queue.store.Store` boundary.

Callers never hold ORM rows (they would expire with their session and lazily
query later); they get these instead, and hand these in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from farm.errors import (
    FarmError,
    PhoneFault,
    Retry,
    StoreError,
    StoreUnreachable,
    TrackerUnreachable,
)
from farm.queue.models import (
    Attempt,
    AttemptState,
    Device,
    DeviceEvent,
    DeviceHealth,
    DeviceState,
    HealthSample,
    Job,
    JobState,
    readings_of,
)

__all__ = [
    "INFRA_KINDS",
    "AttemptView",
    "Claim",
    "Decision",
    "DeviceRecord",
    "EventRecord",
    "Failure",
    "FinishedAttempt",
    "JobView",
    "Outcome",
    "ResultView",
    "SnapshotData",
    "TuningData",
]


@dataclass(frozen=True)
class JobView:
    """A job row; ``spec`` is the validated spec as stored (JSON data).

    ``unknown_state``: the state as stored when this farm does not know it (a
    newer farm sharing the database wrote it, e.g. ``paused``); ``state`` is then
    :attr:`JobState.UNKNOWN`. None for every state this farm knows.
    """

    id: int
    kind: str
    spec: Mapping[str, Any]
    state: JobState
    priority: int
    submitted_at: datetime
    not_before: datetime | None
    attempts_max: int
    attempts_made: int
    timeout_s: float
    excluded_serials: tuple[str, ...]
    retry_at: datetime | None
    finished_at: datetime | None
    error: str | None
    run_id: str | None = None  # shared by the jobs of one ``enqueue --each``
    owner: str | None = None  # the API token's owner who enqueued it; None: the local CLI
    unknown_state: str | None = None

    @property
    def shown_state(self) -> str:
        """The state for people: its value, or ``paused (unknown)`` for an unknown one."""
        if self.unknown_state is not None:
            return f"{self.unknown_state} ({JobState.UNKNOWN.value})"
        return self.state.value

    @classmethod
    def of(cls, job: Job) -> JobView:
        """Copy a row."""
        return cls(
            job.id,
            job.kind,
            dict(job.spec),
            job.state,
            job.priority,
            job.submitted_at,
            job.not_before,
            job.attempts_max,
            job.attempts_made,
            job.timeout_s,
            tuple(job.excluded_serials or ()),
            job.retry_at,
            job.finished_at,
            job.error,
            job.run_id,
            job.owner,
            job.stored_state if job.state is JobState.UNKNOWN else None,
        )


@dataclass(frozen=True)
class AttemptView:
    """An attempt row."""

    id: int
    job_id: int
    serials: tuple[str, ...]
    state: AttemptState
    lease_s: float
    lease_expires_at: datetime
    heartbeat_at: datetime
    started_at: datetime
    finished_at: datetime | None
    error_kind: str | None
    error: str | None
    host: str | None = None  # the farmd host id that ran it (Settings.host_id)
    helper: bool = False  # a helper attempt (farm.queue.helpers): task rows only, no result

    @classmethod
    def of(cls, attempt: Attempt) -> AttemptView:
        """Copy a row."""
        return cls(
            attempt.id,
            attempt.job_id,
            tuple(attempt.serials),
            attempt.state,
            attempt.lease_s,
            attempt.lease_expires_at,
            attempt.heartbeat_at,
            attempt.started_at,
            attempt.finished_at,
            attempt.error_kind,
            attempt.error,
            attempt.host,
            bool(attempt.helper),
        )


@dataclass(frozen=True)
class FinishedAttempt:
    """An ended attempt with its job's kind, as the job-duration metric reads it."""

    attempt_id: int
    kind: str
    started_at: datetime
    finished_at: datetime

    @property
    def duration_s(self) -> float:
        """Seconds from start to end."""
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class Claim:
    """A job that ``Store.claim`` started: run ``job.spec`` on ``attempt.serials``."""

    job: JobView
    attempt: AttemptView


@dataclass(frozen=True)
class DeviceRecord:
    """A device row, with its latest health sample where the reader asked for it.

    Attributes:
        health_reason: why ``health`` says what it says, e.g. ``"probe: app not running"``.
        readings: the latest health sample's readings by name, as the device's
            kind declares them (:mod:`farm.health.readings`); empty with no sample.
        sampled_at: when the latest health sample was taken; None if the
            device has none or the reader did not ask.
        held_outside: why a session farm did not open holds the phone, e.g.
            ``"held outside farm by a session from 127.0.0.1:40112"``; None if none does.
        host: the farmd host that owns the device (its adb server sees it,
            :mod:`farm.queue.hosts`); None if no host claimed it yet.
        kind: the device kind (:mod:`farm.controllers`): ``android``, ``board``, ``gpu``.
        serve_key: the tracker key its hold asks it to serve (desired); None:
            its own key.
        serving_key: the key farmd last started its RPC server under (observed).
    """

    serial: str
    state: DeviceState
    health: DeviceHealth
    drained: bool
    facts: Mapping[str, Any]
    attempt_id: int | None
    last_seen: datetime | None
    state_changed_at: datetime | None
    health_reason: str = ""
    readings: Mapping[str, float] = field(default_factory=dict)
    sampled_at: datetime | None = None
    held_outside: str | None = None
    host: str | None = None
    kind: str = "android"
    serve_key: str | None = None
    serving_key: str | None = None

    @classmethod
    def of(cls, device: Device, sample: HealthSample | None = None) -> DeviceRecord:
        """Copy a row, and the figures of ``sample`` (its latest health sample) if given."""
        return cls(
            device.serial,
            device.state,
            device.health,
            device.drained,
            dict(device.facts or {}),
            device.attempt_id,
            device.last_seen,
            device.state_changed_at,
            device.health_reason or "",
            {} if sample is None else readings_of(sample),
            None if sample is None else sample.at,
            device.held_outside,
            device.host,
            device.kind or "android",
            device.serve_key,
            device.serving_key,
        )


@dataclass(frozen=True)
class EventRecord:
    """A device event row: ``from_state -> to_state (reason)``."""

    serial: str
    at: datetime
    from_state: str | None
    to_state: str
    reason: str

    @classmethod
    def of(cls, event: DeviceEvent) -> EventRecord:
        """Copy a row."""
        return cls(event.serial, event.at, event.from_state, event.to_state, event.reason)


@dataclass(frozen=True)
class SnapshotData:
    """A phone's state just before a measured run, and how long gating waited."""

    serial: str
    at: datetime
    battery: Mapping[str, Any] = field(default_factory=dict)
    thermal: Mapping[str, Any] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    thermal_wait_s: float = 0.0
    attempt_id: int | None = None  # set when read back; ignored when stored


@dataclass(frozen=True)
class TuningData:
    """One MetaSchedule tuning record (its JSON form) and what it tuned.

    ``attempt_id`` is the attempt that measured it, as read back from the
    store (None in an outcome: the attempt storing it is known there).
    """

    workload: str
    target: str
    record: Mapping[str, Any]
    attempt_id: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Outcome:
    """What a successful attempt produced.

    Attributes:
        summary: JSON-ready figures, e.g. ``{"median_s": 0.0123, "gflops": 41.2}``.
        samples: every raw measurement, in ``unit`` (seconds for timings), in order.
        unit: the unit of ``samples``.
        sample_serials: the phone of each sample, same length as ``samples``, or empty.
        sample_repetitions: per sample, 0 for the first measurement, 1 for a
            noisy phone's re-run; same length as ``samples``, or empty (all 0).
        snapshots: phone states taken before the measured runs.
        tuning_records: records a tune job produced.
        sample_arms: per sample of an A/B job, the build it timed (``"a"`` or
            ``"b"``); same length as ``samples``, or empty (not an A/B job).
        sample_rounds: per sample of an A/B job, its round (from 0, per
            phone); same length as ``samples``, or empty.
    """

    summary: Mapping[str, Any]
    samples: Sequence[float] = ()
    unit: str = "s"
    sample_serials: Sequence[str] = ()
    snapshots: Sequence[SnapshotData] = ()
    tuning_records: Sequence[TuningData] = ()
    sample_repetitions: Sequence[int] = ()
    sample_arms: Sequence[str] = ()
    sample_rounds: Sequence[int] = ()


@dataclass(frozen=True)
class ResultView:
    """A job's result with its raw samples.

    Attributes:
        samples: every raw value in ``unit``, in the order measured.
        serials: the phone of each sample (None where the kind did not say).
        repetitions: per sample, 0 for the first measurement, 1 for a noisy re-run.
        arms: per sample, an A/B job's build (``"a"``, ``"b"``), else None.
        rounds: per sample, an A/B job's round, else None.
    """

    id: int
    job_id: int
    attempt_id: int
    summary: Mapping[str, Any]
    created_at: datetime
    samples: tuple[float, ...]
    unit: str
    serials: tuple[str | None, ...] = ()
    repetitions: tuple[int, ...] = ()
    arms: tuple[str | None, ...] = ()
    rounds: tuple[int | None, ...] = ()


#: Error kinds of an outage of the host's database or tracker: an attempt they end is
#: handed back (:meth:`farm.queue.store.Store.requeue`) without costing the job a try,
#: as a farmd restart's is (issue 26).
INFRA_KINDS = frozenset({StoreError.__name__, StoreUnreachable.__name__,
                         TrackerUnreachable.__name__})


@dataclass(frozen=True)
class Failure:
    """Why an attempt failed, as plain data (it crosses the child-process boundary).

    Attributes:
        error_kind: the error's class name, e.g. ``"SessionError"``.
        retry: how the queue treats it (:class:`farm.errors.Retry`).
        message: the error's message, shown to the user.
        serial: the phone to blame, for ``Retry.OTHER_PHONE``; None blames all of
            the attempt's phones.
    """

    error_kind: str
    retry: Retry
    message: str
    serial: str | None = None

    @property
    def infra(self) -> bool:
        """Whether an outage of the database or tracker caused it (:data:`INFRA_KINDS`)."""
        return self.error_kind in INFRA_KINDS

    @classmethod
    def from_error(cls, error: BaseException) -> Failure:
        """Classify an exception.

        A FarmError by its own ``retry``; anything else (a bug, or TVM dying
        strangely) retries within the attempt limit.
        """
        if isinstance(error, FarmError):
            serial = error.serial if isinstance(error, PhoneFault) else None
            return cls(type(error).__name__, Retry(error.retry), str(error), serial)
        return cls(type(error).__name__, Retry.SAME_LIMIT, str(error) or type(error).__name__)


class Decision(str, Enum):
    """What ``Store.fail_attempt`` did with the job."""

    REQUEUED = "requeued"
    FAILED = "failed"
    CANCELLED = "cancelled"  # the job was cancelled meanwhile; nothing to retry
    IGNORED = "ignored"  # the attempt had already ended (reaped, finished, reported)
    HELPER_ENDED = "helper ended"  # a helper attempt failed; its job goes on (farm.queue.helpers)
