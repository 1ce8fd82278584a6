"""A/B jobs: which build (arm) and round each sample timed; the A/B job confirming a verdict.

* ``samples.arm``: ``"a"`` or ``"b"`` for an A/B job's samples (``farmctl
  enqueue ab``), NULL for every other kind's.
* ``samples.round``: the A/B round the sample was timed in (from 0, per
  phone), NULL for every other kind's.

* ``regressions.confirm_job_id``: the A/B job the regression watch enqueued
  to settle a suspected change (``verdict`` ``suspected`` until it ends), NULL
  for verdicts written without one.

Nullable columns: hosts on 0011 go on writing samples and verdicts without them.

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
    """Add ``samples.arm``, ``samples.round``, ``regressions.confirm_job_id`` (all NULL so far)."""
    with op.batch_alter_table("samples") as batch:
        batch.add_column(sa.Column("arm", sa.String(length=1), nullable=True))
        batch.add_column(sa.Column("round", sa.Integer(), nullable=True))
    with op.batch_alter_table("regressions") as batch:
        batch.add_column(sa.Column("confirm_job_id", sa.Integer(), nullable=True))
        batch.create_foreign_key("fk_regressions_confirm_job_id_jobs", "jobs",
                                 ["confirm_job_id"], ["id"])


def downgrade() -> None:
    """Drop the three columns."""
    with op.batch_alter_table("regressions") as batch:
        batch.drop_constraint("fk_regressions_confirm_job_id_jobs", type_="foreignkey")
        batch.drop_column("confirm_job_id")
    with op.batch_alter_table("samples") as batch:
        batch.drop_column("round")
        batch.drop_column("arm")
