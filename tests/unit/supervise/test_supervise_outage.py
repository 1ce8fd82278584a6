"""The tracker gate: no claim while farmd's tracker is down or its phones register again."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from device_states import put_state

from farm.clock import FakeClock
from farm.config import Settings
from farm.queue import DeviceState, Store
from farm.runner.dispatcher import Dispatcher
from farm.supervise.outage import TrackerGate

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
WHERE = "127.0.0.1:9190"


class TestTrackerGate:
    def test_closed_while_the_tracker_process_is_dead(self) -> None:
        """A dead tracker is a reason at once, naming its address."""
        alive = [False]
        gate = TrackerGate(lambda: alive[0], WHERE, lambda: 0)
        assert gate() == f"the tracker {WHERE} is down (farmd restarts it)"
        alive[0] = True
        assert gate() is None

    def test_closed_from_the_restart_until_the_fleet_knows_it(self) -> None:
        """A new tracker that answers before the fleet marked its servers stale opens nothing."""
        gate = TrackerGate(lambda: True, WHERE, lambda: 0)
        gate.restarting()
        assert gate() == f"the tracker {WHERE} is restarting" and gate.waiting
        gate.rejoining()
        assert gate() is None and not gate.waiting

    def test_closed_until_no_device_is_left_to_serve_to_the_new_tracker(self) -> None:
        """The fleet's count decides; once open, the gate stops asking until the next restart."""
        left = [2]
        asked: list[int] = []

        def unjoined() -> int:
            asked.append(left[0])
            return left[0]

        gate = TrackerGate(lambda: True, WHERE, unjoined)
        assert gate() is None and asked == []  # no restart: nothing to ask
        gate.restarting()
        gate.rejoining()
        assert gate() == f"the tracker {WHERE} restarted; 2 phone(s) registering again"
        left[0] = 1
        assert gate() == f"the tracker {WHERE} restarted; 1 phone(s) registering again"
        left[0] = 0
        assert gate() is None and not gate.waiting
        left[0] = 5  # a phone the ladder heals later is no tracker outage
        assert gate() is None and asked == [2, 1, 0]


class TestDispatcherGate:
    def test_a_tick_claims_nothing_while_the_gate_has_a_reason(
        self, store: Store, tmp_path: Path
    ) -> None:
        """A held-back tick leaves the job queued and says why; the next open tick claims it."""
        store.upsert_device("p1", T0, {"abi": "arm64-v8a", "sdk": 30})
        put_state(store, "p1", DeviceState.READY, "provisioned", T0)
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 16}}, T0)
        reason: list[str | None] = ["the tracker is down"]
        dispatcher = Dispatcher(store, Settings(data_dir=tmp_path), FakeClock(T0),
                                command=lambda *_: [sys.executable, "-c", "pass"],
                                gate=lambda: reason[0])
        report = dispatcher.tick(T0)
        assert report.held_back == "the tracker is down" and report.started == []
        assert store.attempts(job_id) == []
        reason[0] = None
        report = dispatcher.tick(T0)
        assert report.held_back is None and len(report.started) == 1
        for child in dispatcher.children.values():
            child.process.wait()

    def test_an_outage_between_the_ticks_first_look_and_its_queue_read_claims_nothing(
        self, store: Store, tmp_path: Path
    ) -> None:
        """The gate is asked again once the queue is read: open at the tick's start, closed by
        the time the queued job is seen, the job stays queued (a full run claimed one 2 s
        before the new tracker started)."""
        store.upsert_device("p1", T0, {"abi": "arm64-v8a", "sdk": 30})
        put_state(store, "p1", DeviceState.READY, "provisioned", T0)
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 16}}, T0)
        answers = iter([None, "the tracker is down"])
        dispatcher = Dispatcher(store, Settings(data_dir=tmp_path), FakeClock(T0),
                                command=lambda *_: [sys.executable, "-c", "pass"],
                                gate=lambda: next(answers))
        report = dispatcher.tick(T0)
        assert report.held_back == "the tracker is down" and report.started == []
        assert store.attempts(job_id) == []
