"""Which phones fit a job, which may take work now, and in which order jobs go.

The scheduler's rules 1, 2, 3 and 5 (:mod:`farm.queue.scheduler`) as pure
functions of plain rows (:mod:`farm.queue.plan_rows`) and ``now``: free phones,
a job's eligibility and effective priority, and whether a phone matches a
job's selection and has what its workload needs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from farm.queue.capabilities import Requirements, unmet
from farm.queue.models import DeviceState
from farm.queue.plan_rows import DeviceView, QueuedJob
from farm.queue.spec import DeviceSelection

__all__ = [
    "AGING_STEP_S", "Matcher", "effective_priority", "eligible", "fits", "free_phones", "matches"
]


AGING_STEP_S = 600.0


def matches(selection: DeviceSelection, device: DeviceView) -> bool:
    """Whether a phone has every attribute the selection asks for (count aside)."""
    facts = device.facts
    if selection.serials is not None and device.serial not in selection.serials:
        return False
    if selection.kind is not None and device.kind != selection.kind:
        return False
    if selection.abi is not None:
        abis = [*(facts.get("abis") or []), facts.get("abi")]
        if selection.abi not in abis:
            return False
    if selection.soc is not None and str(facts.get("soc", "")).lower() != selection.soc.lower():
        return False
    if selection.sdk_min is not None:
        sdk = facts.get("sdk")
        if not isinstance(sdk, int) or sdk < selection.sdk_min:
            return False
    return selection.gpu is None or selection.gpu.lower() in str(facts.get("gpu", "")).lower()


def fits(job: QueuedJob, device: DeviceView) -> bool:
    """Whether a phone matches the job's selection and has what its workload needs."""
    return matches(job.devices, device) and unmet(job.needs, device.facts) is None


class Matcher:
    """Which phones fit a job, computed once per distinct selection and requirements.

    Most queued jobs share a handful of selections (the store's snapshot gives
    them one shared :class:`DeviceSelection` object each), so a plan over 1000
    jobs matches each phone a handful of times, not 1000.
    """

    def __init__(self, devices: Sequence[DeviceView]) -> None:
        self.devices = devices
        # id() of the selection: a DeviceSelection with serials is unhashable,
        # and the snapshot keeps every selection alive while this is used.
        self._fitting: dict[tuple[int, Requirements], frozenset[str]] = {}

    def fitting(self, job: QueuedJob) -> frozenset[str]:
        """Serials of the known phones (any state) that fit ``job``."""
        key = (id(job.devices), job.needs)
        found = self._fitting.get(key)
        if found is None:
            found = frozenset(d.serial for d in self.devices if fits(job, d))
            self._fitting[key] = found
        return found


def free_phones(
    devices: Sequence[DeviceView], now: datetime, device_kinds: Collection[str] | None = None
) -> list[str]:
    """Serials of the phones that may take work at ``now`` (rule 1), sorted.

    Args:
        devices: every known phone.
        now: the current time (aware UTC).
        device_kinds: the device kinds this farm knows (:func:`farm.controllers.kinds`);
            a device of any other kind takes no work. None: every kind.
    """
    return sorted(
        d.serial
        for d in devices
        if d.state is DeviceState.READY and not d.drained and d.held_outside is None
        and not d.reserved(now) and (device_kinds is None or d.kind in device_kinds)
    )


def effective_priority(job: QueuedJob, now: datetime, aging_step_s: float = AGING_STEP_S) -> int:
    """``priority`` plus one point per ``aging_step_s`` seconds the job has been eligible."""
    since = max(job.submitted_at, job.not_before or job.submitted_at)
    waited_s = max(0.0, (now - since).total_seconds())
    return job.priority + int(waited_s // aging_step_s)


def eligible(job: QueuedJob, now: datetime) -> bool:
    """Whether neither ``not_before`` nor a retry's backoff keeps the job waiting at ``now``."""
    return all(t is None or t <= now for t in (job.not_before, job.retry_at))
