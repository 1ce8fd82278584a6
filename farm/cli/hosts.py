"""``farmctl hosts``: the farmd hosts sharing this database, alive or dead.

Each farmd upserts its ``hosts`` row at start and stamps it every
``hosts.heartbeat_s``; one silent for ``hosts.dead_after_s`` is dead, and its
phones show as ``unreachable`` in ``farmctl devices`` (:mod:`farm.queue.hosts`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import click

from farm.cli.output import Column, echo_json, plain, print_table
from farm.cli.state import CliState, pass_state
from farm.clock import SystemClock

__all__ = ["hosts"]

_COLUMNS = [
    Column("host_id", "host"), Column("status"), Column("tracker"),
    Column("phones", justify="right"), Column("heartbeat_age_s", "beat s ago", "right"),
    Column("started_at", "started"), Column("schema_revision", "schema"),
    Column("code_version", "version"),
]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_state
def hosts(state: CliState, as_json: bool) -> None:
    """List farmd hosts: alive or dead, tracker, phones, heartbeat, schema and farm version.

    The schema revision and version are blank for a farmd older than revision 0005.
    """
    queue, now = state.queue, SystemClock().now()
    records = queue.hosts()
    dead = queue.dead_hosts()
    phones = Counter(d.host for d in queue.devices())
    rows: list[dict[str, Any]] = [
        {
            **plain(h),
            "status": "dead" if h.host_id in dead else "alive",
            "tracker": f"{h.tracker_host}:{h.tracker_port}",
            "phones": phones.get(h.host_id, 0),
            "heartbeat_age_s": round((now - h.heartbeat_at).total_seconds(), 1),
        }
        for h in records
    ]
    if as_json:
        echo_json(rows)
        return
    print_table(rows, _COLUMNS, "hosts")
