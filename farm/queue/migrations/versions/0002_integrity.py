"""Integrity: one running attempt per phone, health reasons, attempt owners.

* ``phone_holds``: one row per phone held by a running attempt. ``serial`` is
  the primary key, so the database itself refuses a second running attempt on
  a phone whatever a racing writer believed it read.
* ``devices.health_reason``: why the health axis says what it says.
* ``attempts.host``: the host id of the farmd that runs the attempt, so a
  farmd restarted on the same host reclaims its predecessor's attempts at once.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``phone_holds``, ``devices.health_reason`` and ``attempts.host``.

    ``phone_holds`` has the serial as primary key: one running attempt per phone.
    """
    op.create_table(
        "phone_holds",
        sa.Column("serial", sa.String(length=128), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["attempt_id"], ["attempts.id"]),
        sa.ForeignKeyConstraint(["serial"], ["devices.serial"]),
        sa.PrimaryKeyConstraint("serial"),
    )
    with op.batch_alter_table("phone_holds", schema=None) as batch_op:
        batch_op.create_index("ix_phone_holds_attempt_id", ["attempt_id"], unique=False)
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("health_reason", sa.Text(), nullable=False, server_default="")
        )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("host", sa.String(length=128), nullable=True))


def downgrade() -> None:
    """Remove what :func:`upgrade` added."""
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("host")
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.drop_column("health_reason")
    with op.batch_alter_table("phone_holds", schema=None) as batch_op:
        batch_op.drop_index("ix_phone_holds_attempt_id")
    op.drop_table("phone_holds")
