"""Health readings as one JSON column: a kind's readings need no column each.

* ``health_samples.readings``: ``{name: value}`` of the readings the device's
  kind declares (:mod:`farm.health.readings`), e.g. ``{"battery_temp_c": 31.2,
  "thermal_status": 0}`` for a phone, ``{"load_1m": 0.4, ...}`` for a board.
  Existing rows get their per-reading columns' values copied in.

The per-reading columns (``battery_pct``, ``battery_temp_c``,
``thermal_status``, ``max_zone_temp_c``, ``free_storage_mb``) stay and are
still written for a phone's readings, so a host on 0007 reading rows this farm
writes sees its phones as before; farm reads ``readings`` and falls back to
them for a row written by such a host (``readings`` NULL). Drop them once every
host runs this revision.

Revision ID: 0009
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None

#: The per-reading columns of 0001, copied into ``readings``.
LEGACY = ("battery_pct", "battery_temp_c", "thermal_status", "max_zone_temp_c",
          "free_storage_mb")


def upgrade() -> None:
    """Add ``health_samples.readings`` and copy the per-reading columns into it."""
    with op.batch_alter_table("health_samples", schema=None) as batch_op:
        batch_op.add_column(sa.Column("readings", sa.JSON(), nullable=True))
    samples = sa.table("health_samples", sa.column("readings", sa.JSON()),
                       *(sa.column(name) for name in LEGACY))
    pairs = [part for name in LEGACY for part in (sa.literal(name), samples.c[name])]
    if op.get_bind().dialect.name == "postgresql":
        op.execute(samples.update().values(
            readings=sa.func.json_strip_nulls(sa.func.json_build_object(*pairs))))
        return
    # SQLite's JSON1 (built into the SQLite of every supported Python): json_object
    # keeps NULLs, so each NULL column's key is removed again.
    op.execute(samples.update().values(readings=sa.func.json_object(*pairs)))
    for name in LEGACY:
        op.execute(samples.update().where(samples.c[name].is_(None))
                   .values(readings=sa.func.json_remove(samples.c.readings, f"$.{name}")))


def downgrade() -> None:
    """Drop ``health_samples.readings`` (the per-reading columns still hold a phone's readings)."""
    with op.batch_alter_table("health_samples", schema=None) as batch_op:
        batch_op.drop_column("readings")
