"""Fleet tuning records: workloads by structural hash, records by workload, target and device model.

MetaSchedule's JSON database keeps two files: workloads (``[shash, module]``)
and records (``[workload_index, [trace, run_secs, target, args_info]]``).
These tables mirror them, so any tuning can start from the fleet's best:

* ``tuning_workloads``: one row per workload, ``shash`` (MetaSchedule's
  structural hash, as its ``database_workload.json`` writes it) unique, and
  ``module`` (its JSON form, base64 as in that file).
* ``tuning_records``, the existing per-job table, gains ``workload_id``,
  ``device_model`` (the phone model, or its SoC), ``run_s`` (the mean of the
  record's run times; NULL when the measurement failed) and ``record_key``
  (unique: one record per trace, workload, target and device model, so a
  record seeded into a later job is not kept twice). ``job_id`` and
  ``attempt_id`` become nullable: a record imported with ``farmctl records
  import`` came from no job. Rows written before this revision keep NULL in
  the new columns and are not served.

Only new columns and a new table: hosts on 0005 keep writing their rows.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``tuning_workloads``; add the fleet columns to ``tuning_records``."""
    op.create_table(
        "tuning_workloads",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("shash", sa.String(length=32), nullable=False),
        sa.Column("module", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("shash"),
    )
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.alter_column("job_id", existing_type=sa.Integer(), nullable=True)
        batch_op.alter_column("attempt_id", existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column("workload_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("device_model", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("run_s", sa.Double(), nullable=True))
        batch_op.add_column(sa.Column("record_key", sa.String(length=64), nullable=True))
        batch_op.create_foreign_key("fk_tuning_records_workload_id", "tuning_workloads",
                                    ["workload_id"], ["id"])
        batch_op.create_index("ix_tuning_records_best", ["workload_id", "device_model", "run_s"],
                              unique=False)
        batch_op.create_index("ux_tuning_records_record_key", ["record_key"], unique=True)


def downgrade() -> None:
    """Drop them (rows without a job are deleted first: the columns become NOT NULL again)."""
    op.execute("DELETE FROM tuning_records WHERE job_id IS NULL OR attempt_id IS NULL")
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.drop_index("ux_tuning_records_record_key")
        batch_op.drop_index("ix_tuning_records_best")
        batch_op.drop_constraint("fk_tuning_records_workload_id", type_="foreignkey")
        batch_op.drop_column("record_key")
        batch_op.drop_column("run_s")
        batch_op.drop_column("device_model")
        batch_op.drop_column("workload_id")
        batch_op.alter_column("attempt_id", existing_type=sa.Integer(), nullable=False)
        batch_op.alter_column("job_id", existing_type=sa.Integer(), nullable=False)
    op.drop_table("tuning_workloads")
