"""``farmctl devices | drain SERIAL | undrain SERIAL | release SERIAL``.

Drain is a flag apart from the phone's state: a drained phone finishes its
attempt and then gets no work until undrained. Release takes a phone out of
``quarantined`` back to ``discovered``, so it is set up and health-checked
afresh before it takes work (LAVA resets health to Unknown for the same reason).
"""

from __future__ import annotations

from typing import Any

import click

from farm.cli.output import Column, echo_json, plain, print_table
from farm.cli.state import CliState, pass_state, warn_if_no_farmd
from farm.clock import SystemClock
from farm.errors import UserFault
from farm.queue.models import DeviceState
from farm.queue.records import DeviceRecord

__all__ = ["devices", "drain", "release", "undrain"]

_COLUMNS = [
    Column("serial"), Column("state"), Column("health"), Column("drained"), Column("abi"),
    Column("sdk", justify="right"), Column("soc"), Column("gpu"), Column("attempt_id", "attempt", "right"),
    Column("last_seen", "last seen"),
]


def _row(record: DeviceRecord) -> dict[str, Any]:
    facts = record.facts
    return {**plain(record), "state": record.state, "health": record.health,
            "drained": "yes" if record.drained else "", "abi": facts.get("abi"), "sdk": facts.get("sdk"),
            "soc": facts.get("soc"), "gpu": facts.get("gpu"), "last_seen": record.last_seen}


def _unknown(serial: str) -> UserFault:
    return UserFault(f"no phone {serial!r} is known (see farmctl devices)")


def _known(state: CliState, serial: str) -> DeviceRecord:
    record = state.store.get_device(serial)
    if record is None:
        raise _unknown(serial)
    return record


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_state
def devices(state: CliState, as_json: bool) -> None:
    """List phones: state, health, drain flag and facts."""
    records = state.store.list_devices()
    if as_json:
        echo_json(records)
        return
    print_table([_row(r) for r in records], _COLUMNS, "phones")
    warn_if_no_farmd(state, "states shown may be stale")


@click.command()
@click.argument("serial")
@click.option("--reason", default="drained by operator", show_default=True)
@pass_state
def drain(state: CliState, serial: str, reason: str) -> None:
    """Let a phone finish its attempt, then give it no more work."""
    _known(state, serial)
    changed = state.store.set_drained(serial, True, reason, SystemClock().now())
    click.echo(f"{serial} drained" if changed else f"{serial} was already drained")


@click.command()
@click.argument("serial")
@click.option("--reason", default="undrained by operator", show_default=True)
@pass_state
def undrain(state: CliState, serial: str, reason: str) -> None:
    """Let a drained phone take work again."""
    _known(state, serial)
    changed = state.store.set_drained(serial, False, reason, SystemClock().now())
    click.echo(f"{serial} undrained" if changed else f"{serial} was not drained")


@click.command()
@click.argument("serial")
@pass_state
def release(state: CliState, serial: str) -> None:
    """Release a quarantined phone: it is set up and health-checked again."""
    was = state.store.release_quarantined(
        serial, "released from quarantine by operator", SystemClock().now()
    )
    if was is None:
        raise _unknown(serial)
    if was is not DeviceState.QUARANTINED:
        raise UserFault(f"{serial} is not quarantined (it is {was.value})")
    click.echo(f"{serial} released from quarantine; farmd checks it before it takes work")
    warn_if_no_farmd(state, "it is checked once farmd starts")
