"""The scheduler: a pure function from the queue's state and a clock to assignments.

:func:`plan` reads a :class:`QueueSnapshot` (made by ``Store.snapshot()``) and
``now`` and returns which job goes on which phones. It opens no session, reads no
clock and remembers nothing between calls, so it is tested with plain data
(LAVA's ``schedule()`` keeps its state in the database for the same reason, but
reads the clock inside; this one does not). ``Store.claim()`` then applies the
assignments with conditional updates, so a stale snapshot can only lose a race,
never double-book a phone.

The rules, in order:

1. Only phones that are ``ready`` and not drained get work, one job each.
2. Jobs whose ``not_before`` or ``retry_at`` (a retry's backoff) is in the
   future wait.
3. Jobs go in order of effective priority (highest first), then submit time, then
   id. Effective priority is ``priority + floor(waited_s / aging_step_s)``: a job
   gains one point for every ``aging_step_s`` (default 600 s) since it was
   submitted or its ``not_before``, whichever is later (a retry keeps what it
   earned), so a job ``d`` points below a steady stream of fresh jobs runs after
   at most about ``d * aging_step_s``. Nothing starves.
4. A job needing ``k`` phones gets ``k`` matching phones at once or none. If it
   cannot start now but could once busy phones free up, the free phones it
   matches are held for it, so a stream of one-phone jobs cannot starve it.
5. Phones that failed a job earlier are not offered that job again, unless too
   few other phones match for it to ever run.
6. Free phones are tried in an order shuffled by ``seed``: without it the same
   phones would always win (LAVA orders devices ``"?"`` for this reason).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from farm.queue.models import DeviceState
from farm.queue.spec import DeviceSelection

__all__ = [
    "AGING_STEP_S",
    "Assignment",
    "DeviceView",
    "QueueSnapshot",
    "QueuedJob",
    "effective_priority",
    "matches",
    "plan",
]

AGING_STEP_S = 600.0

# States from which a phone comes back to ``ready`` by itself: a job that needs
# such phones is worth holding free ones for.
_IN_SERVICE = frozenset(
    {DeviceState.READY, DeviceState.BUSY, DeviceState.COOLING, DeviceState.PROVISIONING}
)


@dataclass(frozen=True)
class DeviceView:
    """A phone as the scheduler sees it.

    ``facts`` keys matched by :func:`matches`: ``abi`` (str), ``abis`` (list of
    str, ro.product.cpu.abilist), ``soc`` (str), ``sdk`` (int), ``gpu`` (str).
    """

    serial: str
    state: DeviceState
    drained: bool = False
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class QueuedJob:
    """A queued job as the scheduler sees it; ``not_before``/``retry_at`` None mean now."""

    id: int
    kind: str
    priority: int
    submitted_at: datetime
    devices: DeviceSelection
    not_before: datetime | None = None
    excluded_serials: frozenset[str] = frozenset()
    retry_at: datetime | None = None


@dataclass(frozen=True)
class QueueSnapshot:
    """Everything :func:`plan` decides from: queued jobs and every known phone."""

    jobs: Sequence[QueuedJob]
    devices: Sequence[DeviceView]


@dataclass(frozen=True)
class Assignment:
    """Run job ``job_id`` on ``serials``, holding them by a lease of ``lease_s`` seconds."""

    job_id: int
    serials: tuple[str, ...]
    lease_s: float


def matches(selection: DeviceSelection, device: DeviceView) -> bool:
    """Whether a phone has every attribute the selection asks for (count aside)."""
    facts = device.facts
    if selection.serials is not None and device.serial not in selection.serials:
        return False
    if selection.abi is not None:
        abis = list(facts.get("abis") or []) + [facts.get("abi")]
        if selection.abi not in abis:
            return False
    if selection.soc is not None and str(facts.get("soc", "")).lower() != selection.soc.lower():
        return False
    if selection.sdk_min is not None:
        sdk = facts.get("sdk")
        if not isinstance(sdk, int) or sdk < selection.sdk_min:
            return False
    return selection.gpu is None or selection.gpu.lower() in str(facts.get("gpu", "")).lower()


def effective_priority(job: QueuedJob, now: datetime, aging_step_s: float = AGING_STEP_S) -> int:
    """``priority`` plus one point per ``aging_step_s`` seconds the job has been eligible."""
    since = max(job.submitted_at, job.not_before or job.submitted_at)
    waited_s = max(0.0, (now - since).total_seconds())
    return job.priority + int(waited_s // aging_step_s)


def _eligible(job: QueuedJob, now: datetime) -> bool:
    return all(t is None or t <= now for t in (job.not_before, job.retry_at))


def plan(
    snapshot: QueueSnapshot,
    now: datetime,
    *,
    seed: int = 0,
    lease_s_by_kind: Mapping[str, float],
    aging_step_s: float = AGING_STEP_S,
) -> list[Assignment]:
    """Decide which queued jobs start now, and on which phones.

    Args:
        snapshot: queued jobs and all known phones.
        now: the current time (aware UTC).
        seed: shuffles the order free phones are tried in; vary it per call.
        lease_s_by_kind: seconds an attempt holds its phones without a
            heartbeat, per job kind (every kind of a queued job must be a key;
            farmd passes the config's ``jobs.lease_s`` and ``jobs.tune_lease_s``).
        aging_step_s: seconds of waiting worth one priority point.

    Returns:
        Assignments in decision order; no phone appears twice.
    """
    free = sorted(
        d.serial for d in snapshot.devices if d.state is DeviceState.READY and not d.drained
    )
    random.Random(seed).shuffle(free)
    by_serial = {d.serial: d for d in snapshot.devices}
    in_service = [d for d in snapshot.devices if d.state in _IN_SERVICE and not d.drained]

    eligible = [j for j in snapshot.jobs if _eligible(j, now)]
    eligible.sort(key=lambda j: (-effective_priority(j, now, aging_step_s), j.submitted_at, j.id))

    assignments: list[Assignment] = []
    for job in eligible:
        if not free:
            break
        needed = job.devices.count
        serving = [d for d in in_service if matches(job.devices, d)]
        excluded = job.excluded_serials
        if sum(d.serial not in excluded for d in serving) < needed:
            excluded = frozenset()  # too few others: a failed phone beats never running
        candidates = [s for s in free if s not in excluded and matches(job.devices, by_serial[s])]
        if len(candidates) >= needed:
            chosen = tuple(candidates[:needed])
            assignments.append(Assignment(job.id, chosen, lease_s_by_kind[job.kind]))
            taken = set(chosen)
        elif sum(d.serial not in excluded for d in serving) >= needed:
            taken = set(candidates)  # held until enough of its phones are free
        else:
            continue  # can never run on today's fleet; others may
        free = [s for s in free if s not in taken]
    return assignments
