"""``farmctl devices | drain SERIAL | undrain SERIAL | release SERIAL``.

``devices`` shows each phone's state and health (``good``/``bad`` with the
reason, LAVA's axis), its latest readings that can keep a job off it, as its
kind declares them with units (``readings now``: ``battery_pct 81 %,
max_zone_temp_c 38.2 °C, ...``; every reading is in ``values`` of ``--json``,
:mod:`farm.health.kind_readings`), who holds it
outside farm (a person's own tracker session), who reserved it until when
(``farmctl reserve``) and when farmd last saw it (every health sweep
refreshes it), and the farmd host that runs it. A phone whose host stopped
heartbeating (``hosts.dead_after_s``) shows as ``unreachable``: its row keeps
the dead host's last word (``state`` in ``--json``), and ``unreachable`` is true.
An offline or unreachable phone is not probed: its health shows as ``unknown``
and its readings as stale, with their age (``sampled`` column, ``stale`` and
``readings_age_s`` in ``--json``). Such phones are hidden unless ``--all``.

The table fits a 100-column terminal: serial (never cut), state, health and
why, the readings one a line, and their age; ``--wide`` adds the host, facts,
attempt, holds and last seen, each cell on one line however wide the table
gets (an emulated board's ABI reads ``aarch64, emulated``); ``--json`` has every
field (``emulated`` true for a board under QEMU).

Drain is a flag apart from the phone's state: a drained phone finishes its
attempt and then gets no work until undrained. Release takes a phone out of
``quarantined`` back to ``discovered``, so it is set up and health-checked
afresh before it takes work (LAVA resets health to Unknown for the same reason).
"""

from __future__ import annotations

import click

from farm.cli.output import Column, echo_json, note, print_table
from farm.cli.state import CliState, pass_state, warn_if_no_farmd

__all__ = ["devices", "drain", "release", "undrain"]

#: ``farmctl devices``: what tells whether a device takes work, in 100 columns:
#: the serial whole, one reading a line, and how old the readings are.
_COLUMNS = [
    Column("serial", whole=True), Column("shown_state", "state"), Column("health"),
    Column("health_reason", "why"), Column("now", "readings now", stack=", "),
    Column("readings", "sampled"),
]
#: ``farmctl devices --wide``: every column, facts, holds and host too.
_WIDE_COLUMNS = [
    Column("serial", whole=True), Column("host"), Column("shown_state", "state"),
    Column("health"), Column("health_reason", "why"),
    Column("now", "readings now", stack=", "),
    Column("abi_shown", "abi"), Column("sdk", justify="right"), Column("soc"), Column("gpu"),
    Column("attempt_id", "attempt", "right"), Column("held_outside", "held by"),
    Column("reserved", "reserved"),
    Column("readings", "sampled"), Column("last_seen", "last seen"),
]


@click.command()
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON instead of a table: every field and reading.")
@click.option("--wide", is_flag=True,
              help="Also show host, ABI, SDK, SoC, GPU, attempt, holds, reservation and "
                   "last seen, each cell on one line, however wide (the default table "
                   "fits 100 columns).")
@click.option("--all", "show_all", is_flag=True,
              help="Also list offline and unreachable devices (hidden by default).")
@pass_state
def devices(state: CliState, as_json: bool, wide: bool, show_all: bool) -> None:
    """List devices: state, health and why, the readings their kind declares.

    The table fits a 100-column terminal: serial, state, health and why, the
    readings that can keep a job off the device (one a line) and their age.
    ``--wide`` adds the facts and holds; ``--json`` has every field.
    """
    rows, hidden = state.listing("devices", {"show_all": show_all})
    if as_json:
        echo_json(rows)
    else:
        print_table(rows, _WIDE_COLUMNS if wide else _COLUMNS, "phones", wide=wide)
    if hidden:
        note(f"{hidden} offline or unreachable device{'s' if hidden != 1 else ''} hidden "
             "(--all shows them)")
    if not as_json and not state.listed_by_farmd:
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
