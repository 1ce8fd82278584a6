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

The rows it reads and returns are :mod:`farm.queue.plan_rows`; the matching,
ordering and free-phone rules :mod:`farm.queue.matching` (both re-exported
here). :func:`decide` makes the decisions; :func:`plan` adds the leases, and
:func:`farm.queue.waiting.wait_reasons` explains from the same decisions why a
job waits.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from farm.queue.capabilities import Requirements, group_key
from farm.queue.matching import (
    AGING_STEP_S,
    Matcher,
    effective_priority,
    eligible,
    fits,
    free_phones,
    matches,
)
from farm.queue.plan_rows import IN_SERVICE, Assignment, DeviceView, QueuedJob, QueueSnapshot

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
    "eligible",
    "fits",
    "free_phones",
    "matches",
    "plan",
]


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
