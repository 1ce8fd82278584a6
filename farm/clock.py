"""The clock: the only module in farm that reads the time.

Everything that decides by time takes a :class:`Clock` (or a ``now`` value),
so tests move time with :class:`FakeClock` instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

WAIT_INTERVAL_S = 0.05
"""How often :func:`wait_until` asks its predicate, in seconds."""


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


def wait_until(
    predicate: Callable[[], T],
    deadline_s: float,
    what: str | None = None,
    *,
    interval_s: float = WAIT_INTERVAL_S,
    clock: Clock | None = None,
) -> T | None:
    """Poll ``predicate`` until it returns something truthy: farm's one wait helper.

    Two forms, chosen by ``what``:

    * ``wait_until(p, 5)``: returns the truthy value, or the last falsy one
      after ``deadline_s`` (the caller decides what a timeout means); an
      exception from ``p`` propagates at once.
    * ``wait_until(p, 5, "the app registered")``: returns the truthy value or
      raises :class:`TimeoutError` naming ``what``; an exception from ``p``
      counts as "not yet" until the deadline (a server still starting refuses
      connections), and the last one is chained to the TimeoutError.

    Args:
        predicate: called every ``interval_s`` seconds, at least once.
        deadline_s: how long to keep asking, in seconds.
        what: the condition in words, for the error; None for the first form.
        interval_s: seconds between calls.
        clock: whose ``monotonic`` measures the deadline (the real clock by
            default); the pause between calls is real time either way.

    Raises:
        TimeoutError: ``what`` was given and the predicate stayed falsy.
    """
    monotonic = (clock or SystemClock()).monotonic
    end = monotonic() + deadline_s
    last_exc: Exception | None = None
    value: T | None
    while True:
        if what is None:
            value = predicate()
        else:
            try:
                value = predicate()
            except Exception as exc:  # noqa: BLE001 - "not yet": retried until the deadline
                last_exc, value = exc, None
        if value:
            return value
        if monotonic() >= end:
            if what is None:
                return value
            raise TimeoutError(f"{what}: not true within {deadline_s:g} s") from last_exc
        time.sleep(interval_s)
