"""The recovery history as device event rows: written, read back, pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from farm.fleet.history import events_to_history, reason_of
from farm.queue.records import EventRecord
from farm.supervise.ladder import Failure, Recovery, Released, Step

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def row(
    seconds: float, reason: str, from_state: str = "ready", to_state: str = "ready"
) -> EventRecord:
    """An event row ``seconds`` after T0."""
    return EventRecord("s1", T0 + timedelta(seconds=seconds), from_state, to_state, reason)


class TestEventsToHistory:
    def test_round_trip(self) -> None:
        """Every ladder event written as a reason reads back as itself, oldest first."""
        events = [
            Failure(T0, "app_running false; registered false"),
            Recovery(T0 + timedelta(seconds=1), Step.RESTART_APP, False),
            Recovery(T0 + timedelta(seconds=2), Step.FORCE_STOP_RELAUNCH, True),
            Recovery(T0 + timedelta(seconds=3), Step.QUARANTINE, True),
            Released(T0 + timedelta(seconds=4)),
        ]
        rows = [row((e.at - T0).total_seconds(), reason_of(e)) for e in reversed(events)
                if not (isinstance(e, Recovery) and e.step is Step.QUARANTINE)]
        rows.append(row(3, "recovery gave up", "unhealthy", "quarantined"))
        assert events_to_history(rows) == events

    def test_other_events_are_not_history(self) -> None:
        """State and health changes that are not ladder events are skipped."""
        rows = [row(0, "battery_temp_c 41 > 35", "ready", "cooling"),
                row(1, "health good -> bad (app_running false)"),
                row(2, "recovery: failure (fatal_exception_seen true)")]
        assert events_to_history(rows) == [Failure(T0 + timedelta(seconds=2),
                                                   "fatal_exception_seen true")]

    def test_release_while_farmd_was_down_counts(self) -> None:
        """``farmctl release`` writes only quarantined -> discovered: that is a release."""
        rows = [row(5, "released from quarantine by operator", "quarantined", "discovered")]
        assert events_to_history(rows) == [Released(T0 + timedelta(seconds=5))]

    def test_unknown_step_is_skipped(self) -> None:
        """A step this farmd does not know (a newer farmd wrote it) is not history."""
        assert events_to_history([row(0, "recovery: teleport ok")]) == []
