"""Several hosts on one database, reservations, API tokens, stored inputs, device kinds.

* ``hosts``: one row per farmd host id, with its heartbeat (a host whose
  heartbeat is old is dead: its phones show as unreachable) and the tracker
  address users and jobs reach its phones through.
* ``devices.host``: the host whose adb server (or SSH/NVML controller) sees the
  device; only that host's farmd sweeps, provisions and runs it.
* ``devices.kind``: the device kind (``android``, ``board``, ``gpu``), the
  device-controller registry's name.
* ``jobs.owner``: who enqueued the job (the API token's owner; NULL for the
  local CLI).
* ``reservations``: a device taken out of scheduling for a person until
  ``expires_at``; at most one active (``ended_at`` NULL) per device, by a
  partial unique index both SQLite and PostgreSQL enforce.
* ``api_tokens``: the HTTP API's tokens, stored as SHA-256 digests only.
* ``blobs``: job inputs (model files) by the SHA-256 of their bytes, so any
  host can run any job.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``hosts``, ``reservations``, ``api_tokens``, ``blobs`` and their columns."""
    op.create_table(
        "hosts",
        sa.Column("host_id", sa.String(length=128), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tracker_host", sa.String(length=255), nullable=False),
        sa.Column("tracker_port", sa.Integer(), nullable=False),
        sa.Column("info", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("host_id"),
    )
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("host", sa.String(length=128), nullable=True))
        batch_op.add_column(
            sa.Column("kind", sa.String(length=16), nullable=False, server_default="android")
        )
        batch_op.create_index("ix_devices_host", ["host"], unique=False)
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("owner", sa.String(length=128), nullable=True))
    op.create_table(
        "reservations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("serial", sa.String(length=128), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["serial"], ["devices.serial"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ux_reservations_active_serial", "reservations", ["serial"], unique=True,
        sqlite_where=sa.text("ended_at IS NULL"), postgresql_where=sa.text("ended_at IS NULL"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("operator", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_sha256", name="uq_api_tokens_token_sha256"),
    )
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sha256"),
    )


def downgrade() -> None:
    """Remove what :func:`upgrade` added."""
    op.drop_table("blobs")
    op.drop_table("api_tokens")
    op.drop_index("ux_reservations_active_serial", table_name="reservations")
    op.drop_table("reservations")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("owner")
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.drop_index("ix_devices_host")
        batch_op.drop_column("kind")
        batch_op.drop_column("host")
    op.drop_table("hosts")
