"""Enum columns that read values written by a newer farm without crashing (rolling upgrades).

Hosts of different versions share one PostgreSQL during an upgrade. A newer
farm may add a device state; an older host reading that row through
``sa.Enum`` raised ``LookupError``, so ``/api/v1/devices`` answered 500 and the
dispatcher's every tick crashed (issue 26). :class:`TolerantEnum` stores the
enum's value as before (the same ``VARCHAR``, no schema change) and reads a
value it does not know as ``fallback``, logging it once per value and process.
The fallback must be a state that no code schedules or writes back
(``DeviceState.UNKNOWN``: not in service, never free; ``JobState.UNKNOWN``: not
queued, not ended, never cancelled here); a conditional update that expects it
matches no row, so the newer host's value is never overwritten. A job row keeps
the value as written beside it (``Job.stored_state``) so it can be shown
(``paused (unknown)``).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.types import TypeDecorator

from farm import logs

__all__ = ["TolerantEnum"]

log = logs.get_logger(__name__)

#: (enum name, value) pairs already logged by this process.
_LOGGED: set[tuple[str, str]] = set()


class TolerantEnum(TypeDecorator[Enum]):
    """A ``VARCHAR(length)`` holding ``enum_cls``'s values; unknown ones read as ``fallback``.

    Args:
        enum_cls: the ``str`` enum stored.
        fallback: what a value ``enum_cls`` lacks reads as.
        length: the column's width (``sa.Enum(native_enum=False)``'s, 16, by default).
    """

    impl = sa.String
    cache_ok = True

    def __init__(self, enum_cls: type[Enum], fallback: Enum, length: int = 16) -> None:
        super().__init__(length)
        self.enum_cls = enum_cls
        self.fallback = fallback

    def process_bind_param(self, value: Any, _dialect: sa.Dialect) -> str | None:
        """A member (or its value) as its stored value.

        Raises:
            ValueError: ``value`` is no value of the enum.
        """
        if value is None:
            return None
        return str(self.enum_cls(value).value)

    def process_result_value(self, value: str | None, _dialect: sa.Dialect) -> Enum | None:
        """A stored value as its member; one this farm does not know as the fallback."""
        if value is None:
            return None
        try:
            return self.enum_cls(value)
        except ValueError:
            key = (self.enum_cls.__name__, value)
            if key not in _LOGGED:
                _LOGGED.add(key)
                log.warning("unknown_enum_value", enum=self.enum_cls.__name__, value=value,
                            read_as=self.fallback.value,
                            hint="written by a newer farm sharing the database; "
                                 "this host leaves such rows alone")
            return self.fallback
