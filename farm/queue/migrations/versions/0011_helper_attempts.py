"""Helper attempts: a second host's attempt that tunes a running model tune job's free task rows.

* ``attempts.helper``: true for an attempt started by
  :func:`farm.queue.helpers.claim_helper` on a job that is already running
  on another host. It tunes task rows only, stores no result, and its end
  (success, failure, lease run out, farmd gone) never changes its job's
  state or attempt count (:mod:`farm.queue.lifecycle`).

One column with a server default: hosts on 0010 go on writing attempts without it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``attempts.helper`` (false for every attempt made so far)."""
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("helper", sa.Boolean(), nullable=False,
                                   server_default=sa.false()))


def downgrade() -> None:
    """Drop ``attempts.helper``."""
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("helper")
