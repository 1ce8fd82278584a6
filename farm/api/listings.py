"""What ``farmctl jobs`` and ``farmctl devices`` list: their rows, built from the queue.

One builder for each listing, called by farmctl on the database and by farmd
for farmctl over its local socket (:mod:`farm.api.local`), so both print the
same rows. Rows hold the values the CLI renders (datetimes, enums); ``--json``
rows are already plain JSON types.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from farm import controllers
from farm.clock import SystemClock
from farm.health.readings import own_keys
from farm.health.readings import shown as shown_readings
from farm.jsonable import plain
from farm.kinds import KINDS
from farm.queue.hosts import UNREACHABLE, readings_stale, shown_state, stale_health_reason
from farm.queue.records import DeviceRecord, JobView
from farm.queue.reservations import ReservationView
from farm.queue.states import DeviceHealth, DeviceState, JobState
from farm.queue.waiting import utc_text

if TYPE_CHECKING:
    from farm.api.interface import Queue

__all__ = ["device_listing", "device_row", "job_listing", "job_row", "workload_of"]


def job_row(view: JobView) -> dict[str, Any]:
    """One job as farmctl's tables show it: attempts as ``made/max``, state and times typed.

    A state this farm does not know shows as it is stored, marked: ``paused (unknown)``.
    """
    row: dict[str, Any] = plain(view)
    row["attempts"] = f"{view.attempts_made}/{view.attempts_max}"
    row["state"] = view.state if view.unknown_state is None else view.shown_state
    row["submitted_at"] = view.submitted_at
    row["finished_at"] = view.finished_at
    return row


def workload_of(view: JobView) -> str | None:
    """The job's workload label (``gemm n=512 float32``); None for a kind unknown here."""
    kind = KINDS.get(view.kind)
    return None if kind is None else kind.workload(view.spec)


def job_listing(queue: Queue, states: Sequence[str], limit: int, *,
                as_json: bool) -> list[dict[str, Any]]:
    """``farmctl jobs``: the newest ``limit`` jobs (in ``states``, if any), each with why it waits.

    Args:
        queue: the queue as the caller sees it.
        states: :class:`JobState` values; empty means every state.
        limit: the most jobs listed.
        as_json: plain JSON rows (``--json``) instead of the table's.

    Returns:
        One row per job: its fields, ``workload`` (:func:`workload_of`) and
        ``waiting`` (why a queued job is not running, None otherwise).
    """
    views = queue.jobs([JobState(s) for s in states] or None, limit)
    waiting = queue.waiting(views)
    row = plain if as_json else job_row
    return [{**row(v), "workload": workload_of(v), "waiting": waiting.get(v.id)} for v in views]


def device_listing(queue: Queue, *, show_all: bool,
                   now: datetime | None = None) -> tuple[list[dict[str, Any]], int]:
    """``farmctl devices``: one :func:`device_row` per device, and how many were hidden.

    Args:
        queue: the queue as the caller sees it.
        show_all: also list offline and unreachable devices (``--all``).
        now: for the readings' age; the system clock's by default.
    """
    reserved = {v.serial: v for v in queue.reservations()}
    dead = queue.dead_hosts()
    now = now or SystemClock().now()
    rows = [device_row(r, _latest(r), reserved.get(r.serial), dead_hosts=dead, now=now)
            for r in queue.devices()]
    hidden = 0 if show_all else sum(1 for row in rows if row["stale"])
    if hidden:
        rows = [row for row in rows if not row["stale"]]
    return rows, hidden


def _latest(record: DeviceRecord) -> dict[str, Any] | None:
    """The readings of the record's latest health sample, as ``device_row`` takes them."""
    if record.sampled_at is None:
        return None
    return {"at": record.sampled_at, "readings": dict(record.readings)}


def readings_text(kind: str, values: Mapping[str, Any], *, gating_only: bool = False) -> str:
    """A sample's readings for people: ``battery_pct 81 %, max_zone_temp_c 38.2 °C, ...``.

    Args:
        kind: the device's kind (its declaration gives order and units).
        values: the readings by name.
        gating_only: only the readings that can keep a job off the device (the
            table's column), and names this farm does not declare, marked
            ``fan_rpm 1200 (unknown)``.
    """
    parts = []
    for row in shown_readings(kind, values):
        if gating_only and row["known"] and not row["gates"]:
            continue
        unit = f" {row['unit']}" if row["unit"] else ""
        unknown = "" if row["known"] else " (unknown)"
        parts.append(f"{row['name']} {row['value']:g}{unit}{unknown}")
    return ", ".join(parts)


def device_row(record: DeviceRecord, latest: Mapping[str, Any] | None,
               reservation: ReservationView | None = None, *,
               dead_hosts: Collection[str] = (), now: datetime | None = None) -> dict[str, Any]:
    """One phone as ``farmctl devices`` shows it, the same in the table and in ``--json``.

    Args:
        record: the device row.
        latest: its newest health sample (:meth:`Store.health_samples`), None if none.
        reservation: its reservation in force (:meth:`Store.reservations`), None if none.
        dead_hosts: the farmd hosts not heartbeating (``Store.dead_host_ids``):
            their phones show as ``unreachable``.
        now: for the readings' age; the system clock's by default.

    Returns:
        The record's fields, plus ``shown_state`` (``draining`` for a busy drained
        phone: it finishes its attempt, then takes no work), ``health_reason``,
        ``values``: the latest sample's readings as the device's kind declares
        them (``[{"name", "value", "unit", "description"}]``,
        :func:`farm.health.readings.shown`), ``now`` the gating ones as text
        (``max_zone_temp_c 38.2 °C, ...``), each reading declared ``own_key``
        also under its own name (:func:`farm.health.readings.own_keys`: a
        phone's battery %, battery °C and thermal status), and ``sampled_at``; ``held_outside``
        says who holds a phone outside farm (``ready (held outside)`` in the table);
        a device of a kind this farm has no controller for (a newer farm's) shows
        as ``ready (unknown kind hologram)``;
        ``reserved`` (``alice until 2026-11-24T09:00Z``), ``reserved_by`` and
        ``reserved_until`` its reservation (``ready (reserved)`` in the table).
        ``host`` is the farmd host that runs it and ``unreachable`` whether that
        host is dead (``shown_state`` then starts with ``unreachable``).
        ``stale`` says the phone is offline or unreachable: ``health`` is then
        ``unknown`` (``health_reason`` keeps the last judgement); ``readings_age_s``
        is the age of the readings (s) and ``readings`` says it for people.
    """
    unreachable = shown_state(record, dead_hosts) == UNREACHABLE
    busy_drained = record.state is DeviceState.BUSY and record.drained
    shown = "draining" if busy_drained else record.state.value
    if unreachable:
        shown = f"{UNREACHABLE} (was {shown})"
    if record.drained and not busy_drained:
        shown += " (drained)"
    if getattr(record, "held_outside", None):
        shown += " (held outside)"
    if reservation is not None:
        shown += " (reserved)"
    if record.kind not in controllers.kinds():  # a newer farm's device: gets no job here
        shown += f" (unknown kind {record.kind})"
    latest = latest or {}
    values = latest.get("readings") or {}
    stale = readings_stale(record, dead_hosts)
    sampled_at = latest.get("at")
    age_s = None
    if isinstance(sampled_at, datetime):
        age_s = max(0.0, ((now or SystemClock().now()) - sampled_at).total_seconds())
    return {
        "reserved": None if reservation is None else (
            f"{reservation.owner} until {utc_text(reservation.expires_at)}"),
        "reserved_by": None if reservation is None else reservation.owner,
        "reserved_until": None if reservation is None else plain(reservation.expires_at),
        **plain(record),
        "shown_state": shown,
        "unreachable": unreachable,
        # The queue's DeviceRecord carries the reason once it reads devices.health_reason.
        "health_reason": getattr(record, "health_reason", ""),
        **({"health": DeviceHealth.UNKNOWN.value, "health_reason": stale_health_reason(record)}
           if stale else {}),
        **own_keys(values),
        "values": shown_readings(record.kind, values),
        "now": readings_text(record.kind, values, gating_only=True),
        "sampled_at": plain(sampled_at),
        "stale": stale,
        "readings_age_s": age_s,
        "readings": _age_text(age_s, stale),
        **{fact: record.facts.get(fact) for fact in ("abi", "sdk", "soc", "gpu")},
        # Boards under QEMU (farm.controllers.board.is_emulated): their timings are not the CPU's.
        "emulated": bool(record.facts.get("emulated")),
        "abi_shown": (f"{record.facts.get('abi')}, emulated" if record.facts.get("emulated")
                      else record.facts.get("abi")),
    }


def _age_text(age_s: float | None, stale: bool) -> str:
    """``8 s ago``, ``stale, 3 h ago``: how old a phone's readings are."""
    if age_s is None:
        return "none"
    for unit, unit_s in (("d", 86400), ("h", 3600), ("min", 60)):
        if age_s >= unit_s:
            text = f"{age_s / unit_s:.0f} {unit} ago"
            break
    else:
        text = f"{age_s:.0f} s ago"
    return f"stale, {text}" if stale else text
