"""Alembic migrations of the queue database, applied by :func:`farm.queue.db.migrate`."""
