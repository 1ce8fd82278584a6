"""Initial schema: devices, events, health samples, jobs, attempts, results, samples.

Datetimes are stored as ``DateTime(timezone=True)``; ``farm.queue.models.UtcDateTime``
converts them. Enums are VARCHAR(16) holding the enum values.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create every table of the first schema, with its indexes."""
    op.create_table(
        "device_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("serial", sa.String(length=128), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=True),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("device_events", schema=None) as batch_op:
        batch_op.create_index("ix_device_events_serial_at", ["serial", "at"], unique=False)

    op.create_table(
        "devices",
        sa.Column("serial", sa.String(length=128), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "discovered",
                "provisioning",
                "ready",
                "busy",
                "cooling",
                "unhealthy",
                "quarantined",
                "offline",
                "draining",
                name="devicestate",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column(
            "health",
            sa.Enum("unknown", "good", "bad", name="devicehealth", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("drained", sa.Boolean(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=True),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=True),
        sa.Column("state_changed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("serial"),
    )
    op.create_table(
        "health_samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("serial", sa.String(length=128), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("battery_pct", sa.Double(), nullable=True),
        sa.Column("battery_temp_c", sa.Double(), nullable=True),
        sa.Column("thermal_status", sa.Integer(), nullable=True),
        sa.Column("max_zone_temp_c", sa.Double(), nullable=True),
        sa.Column("free_storage_mb", sa.Double(), nullable=True),
        sa.Column("screen_on", sa.Boolean(), nullable=True),
        sa.Column("app_running", sa.Boolean(), nullable=True),
        sa.Column("registered", sa.Boolean(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("health_samples", schema=None) as batch_op:
        batch_op.create_index("ix_health_samples_serial_at", ["serial", "at"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "queued",
                "running",
                "succeeded",
                "failed",
                "cancelled",
                name="jobstate",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts_max", sa.Integer(), nullable=False),
        sa.Column("attempts_made", sa.Integer(), nullable=False),
        sa.Column("timeout_s", sa.Double(), nullable=False),
        sa.Column("excluded_serials", sa.JSON(), nullable=False),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_state_priority", ["state", "priority"], unique=False)

    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("serials", sa.JSON(), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "running",
                "succeeded",
                "failed",
                "abandoned",
                "cancelled",
                name="attemptstate",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("lease_s", sa.Double(), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error_kind", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_attempts_job_id"), ["job_id"], unique=False)
        batch_op.create_index(
            "ix_attempts_state_lease", ["state", "lease_expires_at"], unique=False
        )

    op.create_table(
        "device_snapshots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("serial", sa.String(length=128), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("battery", sa.JSON(), nullable=False),
        sa.Column("thermal", sa.JSON(), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("thermal_wait_s", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("device_snapshots", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_device_snapshots_attempt_id"), ["attempt_id"], unique=False
        )

    op.create_table(
        "results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id"),
    )
    op.create_table(
        "tuning_records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("workload", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tuning_records_job_id"), ["job_id"], unique=False)

    op.create_table(
        "samples",
        sa.Column("result_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.Column("unit", sa.String(length=16), nullable=False),
        sa.Column("serial", sa.String(length=128), nullable=True),
        sa.ForeignKeyConstraint(
            ["result_id"],
            ["results.id"],
        ),
        sa.PrimaryKeyConstraint("result_id", "index"),
    )


def downgrade() -> None:
    """Drop the first schema's tables, dependents first."""
    op.drop_table("samples")
    with op.batch_alter_table("tuning_records", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tuning_records_job_id"))

    op.drop_table("tuning_records")
    op.drop_table("results")
    with op.batch_alter_table("device_snapshots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_device_snapshots_attempt_id"))

    op.drop_table("device_snapshots")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_state_lease")
        batch_op.drop_index(batch_op.f("ix_attempts_job_id"))

    op.drop_table("attempts")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_state_priority")

    op.drop_table("jobs")
    with op.batch_alter_table("health_samples", schema=None) as batch_op:
        batch_op.drop_index("ix_health_samples_serial_at")

    op.drop_table("health_samples")
    op.drop_table("devices")
    with op.batch_alter_table("device_events", schema=None) as batch_op:
        batch_op.drop_index("ix_device_events_serial_at")

    op.drop_table("device_events")
