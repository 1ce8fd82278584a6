"""Alembic environment: runs on the connection :func:`farm.queue.db.migrate` passes.

There is no ``alembic.ini`` and no URL here: the store opens the database and
hands its connection over in ``config.attributes["connection"]``, so migrations
use exactly the engine settings (WAL, busy timeout) the store uses.
"""

from __future__ import annotations

from alembic import context

from farm.queue.models import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    # SQLite cannot ALTER most things; batch mode copies the table instead.
    render_as_batch=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
