"""Comparable results and phones held outside farm.

* ``jobs.run_id``: the jobs one ``enqueue --each`` fanned out, one per phone.
* ``samples.repetition``: 0 for a result's measured run, 1 for a noisy
  result's one re-run.
* ``regressions``: each phone's verdict when a result was compared with its
  baseline by the regression watch.
* ``devices.held_outside``: why a session that farm did not open holds the
  phone (seen in the tracker's summary), or NULL.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``jobs.run_id``, ``samples.repetition``, ``regressions``, ``devices.held_outside``."""
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("run_id", sa.String(length=32), nullable=True))
        batch_op.create_index("ix_jobs_run_id", ["run_id"], unique=False)
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("repetition", sa.Integer(), nullable=False, server_default="0")
        )
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("held_outside", sa.Text(), nullable=True))
    op.create_table(
        "regressions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("baseline_job_id", sa.Integer(), nullable=False),
        sa.Column("serial", sa.String(length=128), nullable=False),
        sa.Column("ratio", sa.Double(), nullable=False),
        sa.Column("ci_low", sa.Double(), nullable=False),
        sa.Column("ci_high", sa.Double(), nullable=False),
        sa.Column("p_value", sa.Double(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["baseline_job_id"], ["jobs.id"]),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("regressions", schema=None) as batch_op:
        batch_op.create_index("ix_regressions_job_id", ["job_id"], unique=False)


def downgrade() -> None:
    """Remove what :func:`upgrade` added."""
    with op.batch_alter_table("regressions", schema=None) as batch_op:
        batch_op.drop_index("ix_regressions_job_id")
    op.drop_table("regressions")
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.drop_column("held_outside")
    with op.batch_alter_table("samples", schema=None) as batch_op:
        batch_op.drop_column("repetition")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_run_id")
        batch_op.drop_column("run_id")
