"""A/B samples: which build (arm) and which round each sample of an A/B job timed.

* ``samples.arm``: ``"a"`` or ``"b"`` for an A/B job's samples (``farmctl
  enqueue ab``), NULL for every other kind's.
* ``samples.round``: the A/B round the sample was timed in (from 0, per
  phone), NULL for every other kind's.

Two nullable columns: hosts on 0011 go on writing samples without them.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``samples.arm`` and ``samples.round`` (NULL for every sample so far)."""
    with op.batch_alter_table("samples") as batch:
        batch.add_column(sa.Column("arm", sa.String(length=1), nullable=True))
        batch.add_column(sa.Column("round", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Drop ``samples.arm`` and ``samples.round``."""
    with op.batch_alter_table("samples") as batch:
        batch.drop_column("round")
        batch.drop_column("arm")
