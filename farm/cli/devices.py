"""``farmctl devices | drain SERIAL | undrain SERIAL | release SERIAL``.

``devices`` shows each phone's state and health (``good``/``bad`` with the
reason, LAVA's axis), its latest battery and thermal readings, who holds it
outside farm (a person's own tracker session), who reserved it until when
(``farmctl reserve``) and when farmd last saw it (every health sweep
refreshes it), and the farmd host that runs it. A phone whose host stopped
heartbeating (``hosts.dead_after_s``) shows as ``unreachable``: its row keeps
the dead host's last word (``state`` in ``--json``), and ``unreachable`` is true.
An offline or unreachable phone is not probed: its health shows as ``unknown``
and its readings as stale, with their age (``readings`` column, ``stale`` and
``readings_age_s`` in ``--json``). Such phones are hidden unless ``--all``.

Drain is a flag apart from the phone's state: a drained phone finishes its
attempt and then gets no work until undrained. Release takes a phone out of
``quarantined`` back to ``discovered``, so it is set up and health-checked
afresh before it takes work (LAVA resets health to Unknown for the same reason).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

import click

from farm.cli.output import Column, echo_json, note, plain, print_table
from farm.cli.state import CliState, pass_state, warn_if_no_farmd
from farm.clock import SystemClock
from farm.queue.hosts import UNREACHABLE, readings_stale, shown_state, stale_health_reason
from farm.queue.models import DeviceHealth, DeviceState
from farm.queue.records import DeviceRecord
from farm.queue.reservations import ReservationView
from farm.queue.waiting import utc_text

__all__ = ["device_row", "devices", "drain", "release", "undrain"]

_COLUMNS = [
    Column("serial"), Column("host"), Column("shown_state", "state"), Column("health"),
    Column("health_reason", "why"), Column("battery_pct", "batt %", "right"),
    Column("battery_temp_c", "batt °C", "right"), Column("thermal_status", "thermal", "right"),
    Column("abi"), Column("sdk", justify="right"), Column("soc"), Column("gpu"),
    Column("attempt_id", "attempt", "right"), Column("held_outside", "held by"),
    Column("reserved", "reserved"),
    Column("readings"), Column("last_seen", "last seen"),
]

#: Readings of the latest health sample that ``farmctl devices`` shows.
_READINGS = ("battery_pct", "battery_temp_c", "thermal_status")


def _latest(record: DeviceRecord) -> dict[str, Any] | None:
    """The readings of the record's latest health sample, as ``device_row`` takes them."""
    if record.sampled_at is None:
        return None
    return {"at": record.sampled_at, **{name: getattr(record, name) for name in _READINGS}}


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
        the latest ``battery_pct`` (0..100), ``battery_temp_c`` (°C) and
        ``thermal_status`` (PowerManager 0..6), and ``sampled_at``; ``held_outside``
        says who holds a phone outside farm (``ready (held outside)`` in the table);
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
    latest = latest or {}
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
        **{name: latest.get(name) for name in _READINGS},
        "sampled_at": plain(sampled_at),
        "stale": stale,
        "readings_age_s": age_s,
        "readings": _age_text(age_s, stale),
        **{fact: record.facts.get(fact) for fact in ("abi", "sdk", "soc", "gpu")},
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


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--all", "show_all", is_flag=True,
              help="Also list offline and unreachable devices (hidden by default).")
@pass_state
def devices(state: CliState, as_json: bool, show_all: bool) -> None:
    """List phones: state, health and why, battery %, battery °C, thermal status, facts."""
    queue = state.queue
    reserved = {v.serial: v for v in queue.reservations()}
    dead = queue.dead_hosts()
    now = SystemClock().now()
    rows = [device_row(r, _latest(r), reserved.get(r.serial), dead_hosts=dead, now=now)
            for r in queue.devices()]
    hidden = 0 if show_all else sum(1 for row in rows if row["stale"])
    if hidden:
        rows = [row for row in rows if not row["stale"]]
    if as_json:
        echo_json(rows)
    else:
        print_table(rows, _COLUMNS, "phones")
    if hidden:
        note(f"{hidden} offline or unreachable device{'s' if hidden != 1 else ''} hidden "
             "(--all shows them)")
    if not as_json:
        warn_if_no_farmd(state, "states shown may be stale")


@click.command()
@click.argument("serial")
@click.option("--reason", default="drained by operator", show_default=True)
@pass_state
def drain(state: CliState, serial: str, reason: str) -> None:
    """Let a phone finish its attempt, then give it no more work."""
    changed = state.queue.set_drained(serial, True, reason)
    click.echo(f"{serial} drained" if changed else f"{serial} was already drained")


@click.command()
@click.argument("serial")
@click.option("--reason", default="undrained by operator", show_default=True)
@pass_state
def undrain(state: CliState, serial: str, reason: str) -> None:
    """Let a drained phone take work again."""
    changed = state.queue.set_drained(serial, False, reason)
    click.echo(f"{serial} undrained" if changed else f"{serial} was not drained")


@click.command()
@click.argument("serial")
@pass_state
def release(state: CliState, serial: str) -> None:
    """Release a quarantined phone: it is set up and health-checked again."""
    state.queue.release(serial)
    click.echo(f"{serial} released from quarantine; farmd checks it before it takes work")
    warn_if_no_farmd(state, "it is checked once farmd starts")
