"""Tests for farm.clock."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from farm.clock import Clock, FakeClock, SystemClock, wait_until


class TestSystemClock:
    def test_now_is_aware_utc(self):
        """now() is timezone-aware and in UTC."""
        now = SystemClock().now()
        assert now.tzinfo is not None
        assert now.utcoffset() == timedelta(0)

    def test_monotonic_never_goes_back(self):
        """Two monotonic readings are ordered."""
        clock = SystemClock()
        first = clock.monotonic()
        assert clock.monotonic() >= first

    def test_is_a_clock(self):
        """SystemClock and FakeClock satisfy the Clock protocol."""
        assert isinstance(SystemClock(), Clock)
        assert isinstance(FakeClock(), Clock)


class TestFakeClock:
    def test_advance_moves_both(self):
        """advance() moves wall and monotonic time by the same seconds."""
        start = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
        clock = FakeClock(start, monotonic_s=5.0)
        clock.advance(90.5)
        assert clock.now() == start + timedelta(seconds=90.5)
        assert clock.monotonic() == 95.5

    def test_stands_still(self):
        """Without advance() the time does not change."""
        clock = FakeClock()
        assert clock.now() == clock.now()
        assert clock.monotonic() == clock.monotonic()

    def test_converts_to_utc(self):
        """A start in another zone is reported in UTC."""
        start = datetime(2025, 6, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
        assert FakeClock(start).now() == datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
        assert FakeClock(start).now().utcoffset() == timedelta(0)

    def test_naive_start_refused(self):
        """A naive start time is refused."""
        with pytest.raises(ValueError, match="timezone-aware"):
            FakeClock(datetime(2025, 1, 1))  # noqa: DTZ001 - the naive input under test

    def test_no_going_back(self):
        """A negative advance is refused."""
        with pytest.raises(ValueError):
            FakeClock().advance(-1)


class TestWaitUntil:
    def test_returns_the_truthy_value(self) -> None:
        """The predicate's truthy value comes back as soon as it appears."""
        answers = iter([0, "", "ready"])
        assert wait_until(lambda: next(answers), 5, interval_s=0) == "ready"

    def test_without_what_a_timeout_returns_the_falsy_value(self) -> None:
        """Without ``what`` the deadline is the caller's business: the last falsy value."""
        clock = FakeClock()

        def never() -> int:
            clock.advance(1)
            return 0

        assert wait_until(never, 3, interval_s=0, clock=clock) == 0

    def test_without_what_an_error_propagates(self) -> None:
        """Without ``what`` a failing predicate fails the wait at once."""
        def broken() -> bool:
            raise OSError("refused")

        with pytest.raises(OSError, match="refused"):
            wait_until(broken, 5, interval_s=0)

    def test_with_what_errors_are_not_yet_and_the_timeout_names_it(self) -> None:
        """With ``what`` errors count as not yet; the TimeoutError names the condition."""
        clock = FakeClock()

        def refused() -> bool:
            clock.advance(1)
            raise ConnectionRefusedError("not listening")

        with pytest.raises(TimeoutError, match="the server listens: not true within 3 s") as info:
            wait_until(refused, 3, "the server listens", interval_s=0, clock=clock)
        assert isinstance(info.value.__cause__, ConnectionRefusedError)
