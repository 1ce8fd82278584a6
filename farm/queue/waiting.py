"""Why a queued job is not running, and whether a new one could ever run.

Three pure functions over the scheduler's view of the fleet (no session, no clock)::

    wait_reasons(snapshot, now) -> {job_id: reason}   for farmctl job / jobs (and --json)
    refusal(spec, devices)      -> reason | None      checked at enqueue
    fitting_in_service(spec, devices) -> phones       where enqueue --each fans out

Reasons are one line each, e.g. ``0 phones match soc=SM9999``, ``2 match, both
busy``, ``the only match is drained``, ``needs 5 phones, 3 match``,
``not before 2026-11-24T01:00Z``, ``retry backoff until 2026-11-24T01:00Z``,
``the only match is held for a higher-priority job``, ``the only match is held
outside farm by a session from 127.0.0.1:40112``, ``the only match is reserved
by alice until 2026-11-24T07:00Z``, ``the only match is of device kind
'hologram', unknown to this farm``, ``job kind 'x' is not known to this farm
(version 0.1.0): waits for a host that knows it`` (both written by a newer farm
sharing the database). They are computed from the
same decisions :func:`farm.queue.scheduler.plan` makes, so what they say is what
the scheduler does.

With several farmd hosts each plans over its own phones (:mod:`farm.queue.hosts`),
so the decisions are made per host here too: a job that needs two phones of
which one fits on each host waits (``needs 2 phones on one host, at most 1 of
the 2 that match is on one host``), and a dead host's phones show as
``unreachable``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from datetime import UTC, datetime

import farm
from farm.queue.capabilities import describe, group_key, requirements, unmet
from farm.queue.hosts import UNREACHABLE
from farm.queue.models import DeviceState
from farm.queue.scheduler import (
    AGING_STEP_S,
    IN_SERVICE,
    DeviceView,
    Matcher,
    QueuedJob,
    QueueSnapshot,
    decide,
    fits,
    matches,
)
from farm.queue.spec import DeviceSelection, JobSpec

__all__ = ["fitting_in_service", "refusal", "selection_words", "unknown_kind", "utc_text",
           "wait_reasons"]

# States a phone leaves only when a person acts (undrain, release): a job that
# needs such phones is refused at enqueue.
_NEEDS_A_PERSON = frozenset({DeviceState.QUARANTINED})

HELD_FOR_HIGHER = "held for a higher-priority job"


def unknown_kind(kind: str) -> str:
    """Why a job of a kind this farm does not know (a newer farm's) waits.

    ``job kind 'x' is not known to this farm (version 0.1.0): waits for a host that knows it``.
    """
    return (f"job kind {kind!r} is not known to this farm (version {farm.__version__}): "
            "waits for a host that knows it")


def utc_text(at: datetime) -> str:
    """``2026-11-24T01:00Z``: minutes, UTC (seconds when not zero)."""
    at = at.astimezone(UTC)
    text = at.strftime("%Y-%m-%dT%H:%M:%S" if at.second else "%Y-%m-%dT%H:%M")
    return f"{text}Z"


def selection_words(selection: DeviceSelection) -> list[str]:
    """``["serial=a,b", "abi=arm64-v8a", "sdk>=30"]``: what a selection asks for, in words."""
    words = []
    if selection.serials is not None:
        words.append(f"serial={','.join(selection.serials)}")
    if selection.kind is not None:
        words.append(f"kind={selection.kind}")
    for name, value in (("abi", selection.abi), ("soc", selection.soc), ("gpu", selection.gpu)):
        if value is not None:
            words.append(f"{name}={value}")
    if selection.sdk_min is not None:
        words.append(f"sdk>={selection.sdk_min}")
    return words


def _no_match(job: QueuedJob, devices: Sequence[DeviceView]) -> str:
    """``0 phones match soc=SM9999``, saying what the selected phones lack, if anything."""
    if not devices:
        return "0 phones known"
    words = selection_words(job.devices) + describe(job.needs)
    reason = f"0 phones match {', '.join(words)}"
    selected = [d for d in devices if matches(job.devices, d)]
    lacks = Counter(u for d in selected if (u := unmet(job.needs, d.facts)) is not None)
    if lacks:
        what, _ = lacks.most_common(1)[0]
        reason += f" ({len(selected)} selected: {what})"
    return reason


def _tally(statuses: Sequence[str]) -> str:
    """``the only match is drained``, ``2 match, both busy``, ``3 match: 2 busy, 1 offline``."""
    counts = Counter(statuses)
    n = len(statuses)
    if n == 1:
        return f"the only match is {statuses[0]}"
    if len(counts) == 1:
        return f"{n} match, {'both' if n == 2 else 'all'} {statuses[0]}"
    parts = ", ".join(f"{count} {status}" for status, count in counts.most_common())
    return f"{n} match: {parts}"


def _shortfall(job: QueuedJob, fitting: Sequence[DeviceView]) -> str | None:
    """Why too few phones fit for the job to ever run, or None if enough do."""
    needed = job.devices.count
    if len(fitting) < needed:
        return f"needs {needed} phones, {len(fitting)} match"
    if job.needs.alike and needed > 1:
        biggest = max(Counter(group_key(d.facts) for d in fitting).values())
        if biggest < needed:
            return (
                f"needs {needed} phones of one model, {len(fitting)} match "
                f"but at most {biggest} of one model"
            )
    return None


def _status(job: QueuedJob, device: DeviceView, given: dict[str, int], now: datetime,
            dead_hosts: Collection[str] = (), device_kinds: Collection[str] | None = None) -> str:
    """What keeps one fitting phone from the job at ``now``."""
    if device.host is not None and device.host in dead_hosts:
        return UNREACHABLE
    if device_kinds is not None and device.kind not in device_kinds:
        return f"of device kind {device.kind!r}, unknown to this farm"
    if device.drained:
        return "drained"
    if device.reserved(now) and device.reserved_until is not None:
        return f"reserved by {device.reserved_by} until {utc_text(device.reserved_until)}"
    if device.held_outside is not None and device.state in IN_SERVICE:
        return device.held_outside
    holder = given.get(device.serial)
    if holder == job.id:
        return "ready (held for it)"
    if holder is not None:
        return HELD_FOR_HIGHER
    if device.serial in job.excluded_serials and device.state in IN_SERVICE:
        return f"{device.state.value} but failed this job before"
    return device.state.value


def wait_reasons(
    snapshot: QueueSnapshot,
    now: datetime,
    *,
    known_kinds: Collection[str] | None = None,
    job_ids: Collection[int] | None = None,
    aging_step_s: float = AGING_STEP_S,
    dead_hosts: Collection[str] = (),
    device_kinds: Collection[str] | None = None,
) -> dict[int, str]:
    """Why each queued job of ``snapshot`` is not running at ``now``.

    Args:
        snapshot: queued jobs and all known phones (``Store.snapshot()``).
        now: the current time (aware UTC).
        known_kinds: the job kinds farmd can run; None: every kind.
        job_ids: explain only these jobs (the scheduler still decides over
            all); None: every queued job.
        aging_step_s: as for :func:`farm.queue.scheduler.plan`.
        dead_hosts: farmd hosts that stopped heartbeating
            (``Store.dead_host_ids``): nothing is planned on their phones.
        device_kinds: the device kinds this farm knows (:func:`farm.controllers.kinds`):
            a device of another kind (a newer farm's) gets no job; None: every kind.

    Returns:
        One line per queued job id explained; a job the scheduler would start
        now gets ``starts at the next tick``.
    """
    placed: set[int] = set()
    given: dict[str, int] = {}
    for devices in _per_host(snapshot.devices, dead_hosts):  # as each host's farmd plans
        decisions = decide(QueueSnapshot(snapshot.jobs, devices), now, kinds=known_kinds,
                           aging_step_s=aging_step_s, device_kinds=device_kinds)
        placed.update(job.id for job, _ in decisions.placed)
        for serial, job_id in decisions.given.items():
            given.setdefault(serial, job_id)
    matcher = Matcher(snapshot.devices)
    by_serial = {d.serial: d for d in snapshot.devices}
    reasons: dict[int, str] = {}
    for job in snapshot.jobs:
        if job_ids is None or job.id in job_ids:
            fitting = [by_serial[s] for s in sorted(matcher.fitting(job))]
            reasons[job.id] = _reason(job, now, known_kinds, placed, given, snapshot.devices,
                                      fitting, dead_hosts, device_kinds)
    return reasons


def _per_host(
    devices: Sequence[DeviceView], dead_hosts: Collection[str]
) -> list[list[DeviceView]]:
    """The phones each live host plans over: its own and those of no host (all: one group)."""
    hosts = sorted({d.host for d in devices if d.host is not None} - set(dead_hosts))
    unowned = [d for d in devices if d.host is None]
    if not hosts:
        return [unowned if dead_hosts else list(devices)]
    return [[d for d in devices if d.host == host] + unowned for host in hosts]


def _host_shortfall(job: QueuedJob, fitting: Sequence[DeviceView]) -> str | None:
    """Why a job of several phones cannot get them on one host, or None if one has enough."""
    needed = job.devices.count
    hosts = {d.host for d in fitting if d.host is not None}
    if needed == 1 or len(hosts) < 2:
        return None
    unowned = sum(1 for d in fitting if d.host is None)
    most = max(sum(1 for d in fitting if d.host == host) for host in hosts) + unowned
    if most >= needed:
        return None
    return (f"needs {needed} phones on one host, at most {most} of the {len(fitting)} "
            "that match are on one host")


def _reason(
    job: QueuedJob,
    now: datetime,
    known_kinds: Collection[str] | None,
    placed: set[int],
    given: dict[str, int],
    devices: Sequence[DeviceView],
    fitting: Sequence[DeviceView],
    dead_hosts: Collection[str] = (),
    device_kinds: Collection[str] | None = None,
) -> str:
    if known_kinds is not None and job.kind not in known_kinds:
        return unknown_kind(job.kind)
    if job.not_before is not None and job.not_before > now:
        return f"not before {utc_text(job.not_before)}"
    if job.retry_at is not None and job.retry_at > now:
        return f"retry backoff until {utc_text(job.retry_at)}"
    if job.id in placed:
        return "starts at the next tick"
    if not fitting:
        return _no_match(job, devices)
    shortfall = _shortfall(job, fitting) or _host_shortfall(job, fitting)
    if shortfall is not None:
        return shortfall
    return _counted(job, [_status(job, d, given, now, dead_hosts, device_kinds)
                          for d in fitting])


def refusal(spec: JobSpec, devices: Sequence[DeviceView]) -> str | None:
    """Why no known phone could ever run ``spec``, or None if some could.

    "Ever" means without a person acting: a quarantined phone (released only by
    ``farmctl release``) or a drained one (undrained only by a person) does not
    count; a busy, cooling, offline or provisioning phone does, since it comes
    back by itself. With no phone known at all (a fresh farm whose farmd has not
    seen its phones yet) nothing is refused: there is nothing to judge by.

    Args:
        spec: the validated spec.
        devices: every known phone (``Store.snapshot().devices``).

    Returns:
        None if the job could run; else one line, e.g. ``0 phones match
        soc=SM9999`` or ``the only match is quarantined``.
    """
    if not devices:
        return None
    job = _as_queued(spec)
    fitting = [d for d in devices if fits(job, d)]
    if not fitting:
        return _no_match(job, devices)
    shortfall = _shortfall(job, fitting)
    if shortfall is not None:
        return shortfall
    usable = [d for d in fitting if not d.drained and d.state not in _NEEDS_A_PERSON]
    if _shortfall(job, usable) is None:
        return None
    return _counted(job, ["drained" if d.drained else d.state.value for d in fitting])


def fitting_in_service(spec: JobSpec, devices: Sequence[DeviceView]) -> list[DeviceView]:
    """The phones that fit ``spec`` (selection and needs) and are in service, not drained.

    In service is the scheduler's :data:`~farm.queue.scheduler.IN_SERVICE`
    (ready, busy, cooling, provisioning): the phones ``enqueue --each`` fans a
    job out to, in the order given.
    """
    job = _as_queued(spec)
    return [d for d in devices if d.state in IN_SERVICE and not d.drained and fits(job, d)]


def _as_queued(spec: JobSpec) -> QueuedJob:
    """``spec`` as the scheduler sees a queued job (id 0, submitted at the dawn of time)."""
    return QueuedJob(
        0,
        spec.kind,
        spec.priority,
        datetime.min.replace(tzinfo=UTC),
        spec.devices,
        needs=requirements(spec.kind, spec.to_json()),
    )


def _counted(job: QueuedJob, statuses: Sequence[str]) -> str:
    """The tally of the fitting phones' statuses, after how many phones the job needs."""
    tally = _tally(statuses)
    needed = job.devices.count
    if needed == 1:
        return tally
    alike = " of one model" if job.needs.alike else ""
    return f"needs {needed} phones{alike}, {tally}"
