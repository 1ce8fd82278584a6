"""A model tune job's tasks as rows any host may claim, and its one build.

* ``tune_task_work``: one row per job and task workload (``shash``, unique
  per job) with its trials budget, the trials measured so far and the best
  run time, its state (``queued``, ``tuning``, ``done``) and the attempt that
  claimed it last (:mod:`farm.queue.task_work`).
* ``tune_builds``: one row per job (``job_id`` the primary key): the attempt
  that builds the tuned library; ``built_at`` once it is built.

Only new tables: hosts on 0009 go on without them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``tune_task_work`` and ``tune_builds``."""
    op.create_table(
        "tune_task_work",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("shash", sa.String(length=32), nullable=False),
        sa.Column("task", sa.String(length=255), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("trials_measured", sa.Integer(), nullable=False),
        sa.Column("best_s", sa.Double(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=True),
        sa.Column("host", sa.String(length=128), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["attempt_id"], ["attempts.id"]),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "shash", name="ux_tune_task_work_job_shash"),
    )
    op.create_index("ix_tune_task_work_job_id", "tune_task_work", ["job_id"], unique=False)
    op.create_table(
        "tune_builds",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=128), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("built_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["attempt_id"], ["attempts.id"]),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"]),
        sa.PrimaryKeyConstraint("job_id"),
    )


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("tune_builds")
    op.drop_index("ix_tune_task_work_job_id", table_name="tune_task_work")
    op.drop_table("tune_task_work")
