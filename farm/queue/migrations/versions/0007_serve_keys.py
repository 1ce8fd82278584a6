"""What each device must serve and what it serves: desired and observed tracker keys.

* ``devices.serve_key``: the tracker key the device's hold asks it to serve
  (a tuning attempt's job key, written by the attempt as a compare-and-set on
  its hold); NULL: the device's own key. Cleared whenever the device leaves
  ``busy``, so the end of a hold asks for the own key again.
* ``devices.serving_key``: the key the fleet last (re)started the device's
  RPC server under; NULL until farmd launched it.

farmd's fleet compares the two on every sweep and tracker look and serves the
desired one (:meth:`farm.fleet.manager.FleetManager.reconcile`). Nullable
columns only: a host on 0005 keeps working without them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``devices.serve_key`` and ``devices.serving_key``."""
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.add_column(sa.Column("serve_key", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("serving_key", sa.String(length=128), nullable=True))


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("devices", schema=None) as batch_op:
        batch_op.drop_column("serving_key")
        batch_op.drop_column("serve_key")
