"""``farmctl reserve (SERIAL | --abi/--soc/--gpu ...) | unreserve SERIAL | reservations``.

A reservation takes a phone out of scheduling for a person until it expires
(:mod:`farm.queue.reservations`); ``reserve`` prints where to reach it with
TVM's own client, e.g.::

    $ farmctl reserve --soc sm8150 --for 2h
    reserved emulator-5554 for alice until 2026-11-24T09:00Z
    tracker 127.0.0.1:9190 key android-emulator-5554
    tvm.rpc.connect_tracker("127.0.0.1", 9190).request("android-emulator-5554")

The owner defaults to the login name; ``unreserve`` ends only the owner's own
reservation (``--any`` for an operator).
"""

from __future__ import annotations

import getpass
import json
from typing import Any

import click

from farm.cli.output import Column, echo_json, plain, print_table
from farm.cli.state import CliState, pass_state, warn_if_no_farmd
from farm.click_types import Seconds
from farm.errors import SpecError, UserFault
from farm.queue.reservations import ReservationView
from farm.queue.spec import DeviceSelection
from farm.queue.waiting import utc_text

__all__ = ["connect_line", "reservation_row", "reservations", "reserve", "unreserve"]

_COLUMNS = [
    Column("serial"), Column("owner"), Column("expires_at", "until"),
    Column("tracker"), Column("tracker_key", "key"), Column("created_at", "since"),
]


def _login() -> str:
    """The login name, the default owner."""
    try:
        return getpass.getuser()
    except (KeyError, OSError) as exc:  # no passwd entry and no $USER (a container)
        raise UserFault("cannot tell who you are: pass --owner NAME") from exc


def _tracker(state: CliState, view: ReservationView) -> tuple[str, int]:
    """Where the owner reaches the tracker: the device host's row, else this host's settings."""
    tracker = state.settings.tracker
    if view.tracker_host is not None and view.tracker_port is not None:
        return view.tracker_host, view.tracker_port
    return tracker.host, tracker.port


def connect_line(host: str, port: int, key: str) -> str:
    """The Python line that opens a session on the reserved phone."""
    return f"tvm.rpc.connect_tracker({json.dumps(host)}, {port}).request({json.dumps(key)})"


def reservation_row(state: CliState, view: ReservationView) -> dict[str, Any]:
    """One reservation as the table and ``--json`` show it."""
    host, port = _tracker(state, view)
    return {**plain(view), "tracker_host": host, "tracker_port": port,
            "tracker": f"{host}:{port}", "connect": connect_line(host, port, view.tracker_key)}


@click.command()
@click.argument("serial", required=False)
@click.option("--abi", help="Any free phone with this ABI (e.g. arm64-v8a).")
@click.option("--soc", help="Any free phone with this SoC (e.g. SM8150).")
@click.option("--gpu", help="Any free phone whose GPU renderer contains this.")
@click.option("--sdk-min", type=click.IntRange(1, 1000),
              help="Any free phone with this SDK or newer.")
@click.option("--for", "for_s", type=Seconds(0, 366 * 86400.0, min_open=True),
              help="How long: seconds, or with a unit (90m, 2h, 1d); "
                   "default reservations.default_for_s.")
@click.option("--owner", help="Who holds it (default: your login name).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@pass_state
def reserve(state: CliState, serial: str | None, abi: str | None, soc: str | None,
            gpu: str | None, sdk_min: int | None, for_s: float | None, owner: str | None,
            as_json: bool) -> None:
    """Take a phone out of scheduling for you; prints the tracker key to use.

    Give a SERIAL, or a selection (--abi/--soc/--gpu/--sdk-min) to get any free
    matching phone. A busy phone may be reserved by serial: its job finishes
    first. Reserving again extends your reservation.
    """
    settings = state.settings
    limit_s = settings.reservations.max_for_s
    seconds = settings.reservations.default_for_s if for_s is None else for_s
    if seconds > limit_s:
        raise SpecError("--for", f"at most {limit_s:g} s (reservations.max_for_s)")
    picked = any(v is not None for v in (abi, soc, gpu, sdk_min))
    if serial is not None and picked:
        raise UserFault(f"{serial}: give a SERIAL or a selection (--abi/--soc/--gpu/--sdk-min), "
                        "not both")
    if serial is None and not picked:
        raise UserFault("give a SERIAL or a selection (--abi/--soc/--gpu/--sdk-min) to reserve")
    selection = None if serial is not None else DeviceSelection(abi=abi, soc=soc, gpu=gpu,
                                                                sdk_min=sdk_min)
    # Through --server the token's owner reserves; --owner names owners locally.
    who = owner or (None if state.server else _login())
    view = state.queue.reserve(serial, seconds, selection=selection, owner=who)
    row = reservation_row(state, view)
    if as_json:
        echo_json(row)
        return
    click.echo(f"reserved {view.serial} for {view.owner} until {utc_text(view.expires_at)}")
    click.echo(f"tracker {row['tracker']} key {view.tracker_key}")
    click.echo(row["connect"])
    device = state.queue.device(view.serial)
    if device.attempt_id is not None:
        click.echo(f"note: {view.serial} runs attempt {device.attempt_id}; "
                   "your request waits until it ends", err=True)
    warn_if_no_farmd(state, "it expires only when a farmd or a claim sees it")


@click.command()
@click.argument("serial")
@click.option("--owner", help="Whose reservation (default: your login name).")
@click.option("--any", "any_owner", is_flag=True, help="End it whoever holds it (operator).")
@pass_state
def unreserve(state: CliState, serial: str, owner: str | None, any_owner: bool) -> None:
    """End a reservation: the phone takes jobs again."""
    who = None if any_owner or state.server else (owner or _login())
    view = state.queue.unreserve(serial, owner=who)
    click.echo(f"{view.serial} unreserved (was {view.owner}'s)")


@click.command()
@click.option("--all", "show_all", is_flag=True, help="Include ended reservations.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_state
def reservations(state: CliState, show_all: bool, as_json: bool) -> None:
    """List reservations in force: phone, owner, until when, tracker and key."""
    views = state.queue.reservations(ended_too=show_all)
    rows = [reservation_row(state, v) for v in views]
    if as_json:
        echo_json(rows)
        return
    columns = _COLUMNS + ([Column("ended_at", "ended"), Column("end_reason", "why")]
                          if show_all else [])
    print_table(rows, columns, "reservations")
