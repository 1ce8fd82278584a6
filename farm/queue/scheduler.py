"""The scheduler: a pure function from the queue's state and a clock to assignments.

:func:`plan` reads a :class:`QueueSnapshot` (made by ``Store.snapshot()``) and
``now`` and returns which job goes on which phones. It opens no session, reads no
clock and remembers nothing between calls, so it is tested with plain data
(LAVA's ``schedule()`` keeps its state in the database for the same reason, but
reads the clock inside; this one does not). ``Store.claim()`` then applies the
assignments with conditional updates, so a stale snapshot can only lose a race,
never double-book a phone.

The rules, in order:

1. Only phones that are ``ready``, not drained, not held outside farm (a
   person's own tracker session has them), not reserved by a person (a
   reservation whose end time has passed counts as ended) and of a device kind
   this farm knows (``device_kinds``: a newer farm sharing the database may
   have written a kind this one has no controller for) get work, one job each.
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
5. A phone fits a job if it matches the job's device selection (its device
   kind too: ``android``, ``board``, ``gpu``; any kind when none is given) and has what its
   workload needs (:mod:`farm.queue.capabilities`): an OpenCL job never goes to
   a phone without OpenCL, a GPU gemm never to a GPU whose work-group is too
   small. A job needing alike phones (a tune job) gets phones of one kind
   (:func:`~farm.queue.capabilities.group_key`: same model and SoC), never a mix.
6. Phones that failed a job earlier are not offered that job again, unless too
   few other phones fit it for it to ever run.
7. Free phones are tried in an order shuffled by ``seed``: without it the same
   phones would always win (LAVA orders devices ``"?"`` for this reason). A
   job's ``prefer_serials`` among them are tried first: a preference, never
   a limit, so the job takes other matching phones when those are not free.
8. A job of a kind this farmd has no lease for is skipped, not a KeyError: a
   newer farmd sharing the database wrote it, so it stays queued for a host
   that knows it (never started, so never failed, here); the queue goes on.

:func:`decide` makes the decisions; :func:`plan` adds the leases, and
:func:`farm.queue.waiting.wait_reasons` explains from the same decisions why a
job waits.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from farm.queue.capabilities import ANY_PHONE, Requirements, group_key, unmet
from farm.queue.models import DeviceState
from farm.queue.spec import DeviceSelection

__all__ = [
    "AGING_STEP_S",
    "IN_SERVICE",
    "Assignment",
    "Decisions",
    "DeviceView",
    "Matcher",
    "QueueSnapshot",
    "QueuedJob",
    "decide",
    "effective_priority",
    "fits",
    "free_phones",
    "matches",
    "plan",
]

AGING_STEP_S = 600.0

#: States from which a phone comes back to ``ready`` by itself: a job that needs
#: such phones is worth holding free ones for.
IN_SERVICE = frozenset(
    {DeviceState.READY, DeviceState.BUSY, DeviceState.COOLING, DeviceState.PROVISIONING}
)


@dataclass(frozen=True)
class DeviceView:
    """A phone as the scheduler sees it.

    ``facts`` keys matched by :func:`matches`: ``abi`` (str), ``abis`` (list of
    str, ro.product.cpu.abilist), ``soc`` (str), ``sdk`` (int), ``gpu`` (str);
    by :mod:`farm.queue.capabilities`: ``has_opencl``, ``has_vulkan`` (bool),
    ``gpu_limits`` (per target, ``max_threads_per_block``), ``model`` and ``soc``.
    ``held_outside``: why a session farm did not open holds it (None: none does);
    such a phone gets no work until it is free. ``reserved_by`` and
    ``reserved_until``: the owner and end time of its open reservation (None:
    none); it gets no work while ``reserved_until`` is after the plan's ``now``.
    ``host``: the farmd host that runs it (:mod:`farm.queue.hosts`); None: no
    host claimed it yet.
    ``kind``: the device kind (``devices.kind``, a :mod:`farm.controllers`
    name), matched against ``DeviceSelection.kind``.
    """

    serial: str
    state: DeviceState
    drained: bool = False
    facts: Mapping[str, Any] = field(default_factory=dict)
    held_outside: str | None = None
    reserved_by: str | None = None
    reserved_until: datetime | None = None
    host: str | None = None
    kind: str = "android"

    def reserved(self, now: datetime) -> bool:
        """Whether a person's reservation keeps work off the phone at ``now``."""
        return self.reserved_until is not None and self.reserved_until > now


@dataclass(frozen=True)
class QueuedJob:
    """A queued job as the scheduler sees it; ``not_before``/``retry_at`` None mean now.

    ``needs`` is what its workload needs of a phone, from
    :func:`farm.queue.capabilities.requirements` (default: a CPU, any phone).
    """

    id: int
    kind: str
    priority: int
    submitted_at: datetime
    devices: DeviceSelection
    not_before: datetime | None = None
    excluded_serials: frozenset[str] = frozenset()
    retry_at: datetime | None = None
    needs: Requirements = ANY_PHONE


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


@dataclass(frozen=True)
class Decisions:
    """What :func:`decide` chose.

    Attributes:
        placed: (job, serials) to start now, in decision order.
        given: each free phone that was placed or held, and the job id it went to.
        matcher: the fitting phones per job, reusable by whoever explains the
            decisions.
    """

    placed: list[tuple[QueuedJob, tuple[str, ...]]]
    given: dict[str, int]
    matcher: Matcher


# The one group of a job that takes any mix of phones.
_ANY: tuple[str, str] = ("*", "*")


def _group(job: QueuedJob, device: DeviceView) -> tuple[str, str]:
    """The group ``device`` belongs to for ``job``: its kind if the job needs alike phones."""
    return group_key(device.facts) if job.needs.alike else _ANY


def _viable_groups(
    job: QueuedJob, serving: Sequence[DeviceView], excluded: frozenset[str]
) -> set[tuple[str, str]]:
    """The groups with enough in-service phones (outside ``excluded``) to run the job."""
    counts = Counter(_group(job, d) for d in serving if d.serial not in excluded)
    return {group for group, count in counts.items() if count >= job.devices.count}


# The exclusions that apply to a job, and the groups of phones that could run it.
_Judged = tuple[frozenset[str], set[tuple[str, str]]]


def _judge(job: QueuedJob, serving: Sequence[DeviceView]) -> _Judged:
    """Which exclusions hold for the job and which groups could run it, from its serving phones."""
    excluded = job.excluded_serials
    viable = _viable_groups(job, serving, excluded)
    if not viable and excluded:
        excluded = frozenset()  # too few others: a failed phone beats never running
        viable = _viable_groups(job, serving, excluded)
    return excluded, viable


def decide(
    snapshot: QueueSnapshot,
    now: datetime,
    *,
    seed: int = 0,
    kinds: Collection[str] | None = None,
    aging_step_s: float = AGING_STEP_S,
    device_kinds: Collection[str] | None = None,
) -> Decisions:
    """Decide which queued jobs start now and on which phones (the rules in the module doc).

    Args:
        snapshot: queued jobs and all known phones.
        now: the current time (aware UTC).
        seed: shuffles the order free phones are tried in.
        kinds: the job kinds that may start; None: all.
        aging_step_s: seconds of waiting worth one priority point.
        device_kinds: the device kinds that may take work; None: all.

    Returns:
        The decisions; no phone is placed twice.
    """
    free = free_phones(snapshot.devices, now, device_kinds)
    random.Random(seed).shuffle(free)  # noqa: S311 - spreads load over phones, not a secret
    by_serial = {d.serial: d for d in snapshot.devices}
    in_service = [d for d in snapshot.devices if d.state in IN_SERVICE and not d.drained
                  and (device_kinds is None or d.kind in device_kinds)]
    matcher = Matcher(snapshot.devices)

    jobs = [j for j in snapshot.jobs if eligible(j, now) and (kinds is None or j.kind in kinds)]
    jobs.sort(key=lambda j: (-effective_priority(j, now, aging_step_s), j.submitted_at, j.id))

    placed: list[tuple[QueuedJob, tuple[str, ...]]] = []
    given: dict[str, int] = {}
    judged: dict[tuple[int, Requirements, frozenset[str]], _Judged] = {}
    for job in jobs:
        if not free:
            break
        fitting = matcher.fitting(job)
        # Phones in service do not change within one decision: judge each
        # distinct (selection, needs, exclusions) once.
        key = (id(job.devices), job.needs, job.excluded_serials)
        if key not in judged:
            judged[key] = _judge(job, [d for d in in_service if d.serial in fitting])
        excluded, viable = judged[key]
        if not viable:
            continue  # can never run on today's fleet; others may
        candidates = [
            by_serial[s]
            for s in free
            if s in fitting and s not in excluded and _group(job, by_serial[s]) in viable
        ]
        chosen = _first_group(job, _preferred_first(job, candidates))
        if chosen is not None:
            placed.append((job, chosen))
            taken = set(chosen)
        else:
            taken = {d.serial for d in candidates}  # held until enough of its phones are free
        given.update(dict.fromkeys(taken, job.id))
        free = [s for s in free if s not in taken]
    return Decisions(placed, given, matcher)


def _preferred_first(job: QueuedJob, candidates: list[DeviceView]) -> list[DeviceView]:
    """``candidates`` with the job's ``prefer_serials`` first, each part in the order given."""
    prefer = job.devices.prefer_serials
    if not prefer:
        return candidates
    return ([d for d in candidates if d.serial in prefer]
            + [d for d in candidates if d.serial not in prefer])


def _first_group(job: QueuedJob, candidates: Sequence[DeviceView]) -> tuple[str, ...] | None:
    """The first ``count`` candidates of one group, in candidate order; None if none has enough."""
    groups: dict[tuple[str, str], list[str]] = {}
    for device in candidates:
        group = groups.setdefault(_group(job, device), [])
        group.append(device.serial)
        if len(group) == job.devices.count:
            return tuple(group)
    return None


def plan(
    snapshot: QueueSnapshot,
    now: datetime,
    *,
    seed: int = 0,
    lease_s_by_kind: Mapping[str, float],
    aging_step_s: float = AGING_STEP_S,
    device_kinds: Collection[str] | None = None,
) -> list[Assignment]:
    """Decide which queued jobs start now, and on which phones.

    Args:
        snapshot: queued jobs and all known phones.
        now: the current time (aware UTC).
        seed: shuffles the order free phones are tried in; vary it per call.
        lease_s_by_kind: seconds an attempt holds its phones without a
            heartbeat, per job kind (farmd passes the config's ``jobs.lease_s``
            and ``jobs.tune_lease_s``); a job whose kind is not a key is not
            started.
        aging_step_s: seconds of waiting worth one priority point.
        device_kinds: the device kinds this farm knows (farmd passes
            :func:`farm.controllers.kinds`); a device of another kind gets no
            job. None: every kind.

    Returns:
        Assignments in decision order; no phone appears twice.
    """
    decisions = decide(
        snapshot, now, seed=seed, kinds=lease_s_by_kind.keys(), aging_step_s=aging_step_s,
        device_kinds=device_kinds,
    )
    return [
        Assignment(job.id, serials, lease_s_by_kind[job.kind]) for job, serials in decisions.placed
    ]
