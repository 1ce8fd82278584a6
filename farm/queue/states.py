"""The queue's states: what a device, a job and an attempt can be.

Apart from :mod:`farm.queue.models` (which re-exports them) so that code that
only names a state, such as ``farmctl jobs --state``'s choices, does not
import SQLAlchemy's ORM (a fifth of a second of ``farmctl``'s start, issue 25).
"""

from __future__ import annotations

from enum import Enum

__all__ = ["AttemptState", "DeviceHealth", "DeviceState", "JobState"]


class DeviceState(str, Enum):
    """What a phone is doing.

    Draining is not a state but the ``drained`` flag: a drained phone goes on
    doing what it does (``busy`` finishes its attempt) and then takes no work;
    ``farmctl devices`` shows a busy drained phone as ``draining``.
    """

    DISCOVERED = "discovered"  # seen by adb, not yet set up
    PROVISIONING = "provisioning"  # installing or starting the TVM RPC app
    READY = "ready"  # idle, healthy, cool: may take work
    BUSY = "busy"  # running an attempt
    COOLING = "cooling"  # too hot to measure; waits
    UNHEALTHY = "unhealthy"  # a probe failed; the recovery ladder acts
    QUARANTINED = "quarantined"  # recovery gave up; a person must release it
    OFFLINE = "offline"  # gone from adb
    # Never written: how a row reads whose state a newer farm sharing the database
    # wrote and this one does not know (farm/queue/tolerant.py). Not in service,
    # never free: this host neither schedules nor touches the device.
    UNKNOWN = "unknown"


class DeviceHealth(str, Enum):
    """Whether a phone's results can be trusted (LAVA ``Device.HEALTH_*``)."""

    UNKNOWN = "unknown"
    GOOD = "good"
    BAD = "bad"


class JobState(str, Enum):
    """Where a job is in its life (rq ``JobStatus``)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # Never written: how a row reads whose state a newer farm sharing the database
    # wrote and this one does not know, e.g. ``paused`` (farm/queue/tolerant.py).
    # Not queued, not ended: this host neither starts, fails nor ends such a job.
    UNKNOWN = "unknown"

    @property
    def ended(self) -> bool:
        """Whether the job is over (succeeded, failed or cancelled): nothing runs it again."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class AttemptState(str, Enum):
    """How one try of a job on one set of phones went."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABANDONED = "abandoned"  # its lease ran out: farmd died or stopped heartbeating
    CANCELLED = "cancelled"
