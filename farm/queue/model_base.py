"""The base of the queue's tables: the declarative base, aware UTC datetimes, enum columns."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator


def enum_column(cls: type[Enum]) -> sa.Enum:
    """A portable VARCHAR column holding the enum's values (not its names)."""
    return sa.Enum(
        cls,
        native_enum=False,
        length=16,
        values_callable=lambda members: [m.value for m in members],
        validate_strings=True,
    )


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every backend.

    SQLite has no time zones: values are stored as naive UTC and given back
    ``tzinfo=UTC``; PostgreSQL's ``timestamptz`` keeps them natively. A naive
    datetime passed in is a bug (whose clock?), so it is refused.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        """An aware datetime as stored: UTC, naive on SQLite (which keeps no offset).

        Raises:
            ValueError: ``value`` is naive.
        """
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass an aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(
        self, value: datetime | None, _dialect: sa.Dialect
    ) -> datetime | None:
        """A stored datetime as an aware UTC one (a naive one is read as UTC)."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    """Declarative base; JSON columns map ``dict``/``list``."""

    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: sa.JSON,
        list[str]: sa.JSON,
        datetime: UtcDateTime,
    }
