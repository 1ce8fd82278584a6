"""Bounds of the queue's columns, apart from the tables so that farmctl's options can use them.

``farm.click_types`` bounds every id a user types by :data:`DB_INT_MAX` when its
options are declared; importing :mod:`farm.queue.models` for that would load
SQLAlchemy's ORM before farmctl parses its arguments.
"""

from __future__ import annotations

__all__ = ["DB_INT_MAX"]

#: The largest value of the queue's integer columns (ids): PostgreSQL's
#: ``integer`` is 4 bytes, -2147483648 to +2147483647 (PostgreSQL docs, "Numeric
#: Types"); SQLite's 8-byte integers hold more, so the smaller range is the bound.
DB_INT_MAX = 2**31 - 1
