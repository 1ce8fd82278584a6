"""Refusing a migration that live hosts of an older farm could not read (rolling upgrades).

Hosts of several farm versions share one database while they are upgraded one
by one. Most migrations only add (a nullable column, a table): older hosts go
on working. A migration that changes what older code reads (drops or renames a
column, changes a value's meaning) says so with ``older_hosts_cannot_read =
True`` in its module; :func:`refusal` then refuses to apply it while a live host
(heartbeat within ``hosts.dead_after_s``) records an older ``schema_revision``
(``hosts``, revision 0005), or none (a farm older than 0005). Upgrade or stop
those hosts first; a stopped host counts as gone once its heartbeat is that old.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

__all__ = ["BREAKING_FLAG", "LiveHost", "blocking", "breaking_revisions", "live_hosts",
           "refusal"]

#: The module attribute a migration sets to say older farm code cannot read its schema.
BREAKING_FLAG = "older_hosts_cannot_read"


@dataclass(frozen=True)
class LiveHost:
    """A ``hosts`` row as the guard reads it: id, heartbeat, schema revision (None: unknown)."""

    host_id: str
    heartbeat_at: datetime
    schema_revision: str | None


def breaking_revisions(script: ScriptDirectory, current: str | None, head: str) -> list[str]:
    """The revisions from ``current`` (exclusive) to ``head`` flagged :data:`BREAKING_FLAG`."""
    pending = script.iterate_revisions(head, current or "base")
    return sorted(r.revision for r in pending if getattr(r.module, BREAKING_FLAG, False))


def live_hosts(connection: sa.Connection) -> list[LiveHost]:
    """Every ``hosts`` row (none before revision 0004; no revisions before 0005)."""
    inspector = sa.inspect(connection)
    if not inspector.has_table("hosts"):
        return []
    columns = {c["name"] for c in inspector.get_columns("hosts")}
    revision = "schema_revision" if "schema_revision" in columns else "NULL"
    rows = connection.execute(sa.text(
        f"SELECT host_id, heartbeat_at, {revision} FROM hosts")).all()  # noqa: S608 - fixed names
    return [LiveHost(str(r[0]), _aware(r[1]), r[2]) for r in rows]


def blocking(hosts: Iterable[LiveHost], revision: str, now: datetime,
             dead_after_s: float) -> list[LiveHost]:
    """The hosts alive at ``now`` whose schema is older than ``revision`` (or unknown)."""
    since = now - timedelta(seconds=dead_after_s)
    return [h for h in hosts if h.heartbeat_at >= since
            and (h.schema_revision is None or h.schema_revision < revision)]


def refusal(connection: sa.Connection, script: ScriptDirectory, current: str | None,
            head: str, now: datetime, dead_after_s: float) -> str | None:
    """Why upgrading ``connection``'s database from ``current`` to ``head`` must wait, or None."""
    breaking = breaking_revisions(script, current, head)
    if not breaking:
        return None
    stuck = blocking(live_hosts(connection), breaking[-1], now, dead_after_s)
    if not stuck:
        return None
    names = ", ".join(f"{h.host_id} (schema {h.schema_revision or 'before 0005'})"
                      for h in stuck)
    return (f"migration {breaking[-1]} changes what older farm hosts read, and {names} "
            f"still run: upgrade or stop them first (a stopped host counts as gone "
            f"{dead_after_s:g} s after its last heartbeat)")


def _aware(value: datetime | str) -> datetime:
    """A heartbeat as an aware datetime (SQLite gives a raw query naive UTC text back)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
