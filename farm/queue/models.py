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

The tables live by aggregate (``model_devices``, ``model_jobs``,
``model_tuning``, ``model_access``, on ``model_base``); this module gathers
them, so importing it registers every table on ``Base.metadata``, and callers
import every name from here.
"""

from __future__ import annotations

from farm.queue.limits import DB_INT_MAX
from farm.queue.model_access import ApiToken, Blob
from farm.queue.model_base import Base, UtcDateTime
from farm.queue.model_devices import (
    LEGACY_READINGS,
    Device,
    DeviceEvent,
    HealthSample,
    Host,
    Reservation,
    readings_of,
)
from farm.queue.model_jobs import (
    Attempt,
    DeviceSnapshot,
    Job,
    PhoneHold,
    Regression,
    Result,
    Sample,
)
from farm.queue.model_tuning import TuneBuild, TuneTaskWork, TuningRecord, TuningWorkload
from farm.queue.states import AttemptState, DeviceHealth, DeviceState, JobState

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
    "Regression",
    "Reservation",
    "Result",
    "Sample",
    "TuneBuild",
    "TuneTaskWork",
    "TuningRecord",
    "TuningWorkload",
    "UtcDateTime",
    "readings_of",
]
