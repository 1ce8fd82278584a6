"""Each farmd's schema revision and code version in its ``hosts`` row (rolling upgrades).

* ``hosts.schema_revision``: the newest migration the host's farm knows (its
  head), e.g. ``"0005"``; NULL for a host registered by a farm older than this.
* ``hosts.code_version``: its ``farm.__version__``.

``farmctl hosts`` shows both; a later migration that older hosts cannot read
(``older_hosts_cannot_read = True`` in its module) is refused while a live
host's ``schema_revision`` is older than it (:func:`farm.queue.db.migrate`).
Nullable columns only: a host on 0004 keeps registering without them.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``hosts.schema_revision`` and ``hosts.code_version``."""
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("schema_revision", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("code_version", sa.String(length=64), nullable=True))


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.drop_column("code_version")
        batch_op.drop_column("schema_revision")
