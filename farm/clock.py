"""The clock: the only module in farm that reads the time.

Everything that decides by time takes a :class:`Clock` (or a ``now`` value),
so tests move time with :class:`FakeClock` instead of sleeping.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Wall time for records, monotonic time for deadlines."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware, in UTC."""
        ...

    def monotonic(self) -> float:
        """Return seconds on a clock that never goes back, for deadlines and durations."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware, in UTC."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Return ``time.monotonic()`` in seconds."""
        return time.monotonic()


class FakeClock:
    """A clock that moves only when told to, for tests.

    Args:
        start: the initial wall time; must be timezone-aware. Defaults to
            2025-01-01T00:00:00Z.
        monotonic_s: the initial monotonic reading in seconds.

    Raises:
        ValueError: ``start`` is naive (has no timezone).
    """

    def __init__(
        self,
        start: datetime | None = None,
        monotonic_s: float = 1000.0,
    ) -> None:
        start = start or datetime(2025, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("FakeClock start must be timezone-aware")
        self._now = start.astimezone(UTC)
        self._monotonic_s = monotonic_s

    def now(self) -> datetime:
        """Return the fake current time in UTC."""
        return self._now

    def monotonic(self) -> float:
        """Return the fake monotonic reading in seconds."""
        return self._monotonic_s

    def advance(self, seconds: float) -> None:
        """Move both clocks forward.

        Args:
            seconds: how far, >= 0.

        Raises:
            ValueError: ``seconds`` is negative (monotonic time never goes back).
        """
        if seconds < 0:
            raise ValueError(f"cannot advance a clock by {seconds} s")
        self._now += timedelta(seconds=seconds)
        self._monotonic_s += seconds
