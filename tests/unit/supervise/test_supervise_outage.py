"""The tracker gate: no claim while farmd's tracker is down or its phones register again."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from device_states import put_state

from farm.clock import FakeClock, wait_until
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
        gate = TrackerGate(lambda: alive[0], WHERE)
        assert gate() == f"the tracker {WHERE} is down (farmd restarts it)"
        alive[0] = True
        assert gate() is None

    def test_closed_until_every_relaunch_ended_then_opened_once(self) -> None:
        """The gate opens when the last relaunch ends, and says so once."""
        opened: list[int] = []
        gate = TrackerGate(lambda: True, WHERE, on_open=lambda: opened.append(1))
        done: list[Callable[[str], None]] = []

        def relaunch(on_done: Callable[[str], None]) -> set[str]:
            done.append(on_done)
            return {"p1", "p2"}

        assert gate.relaunch(relaunch) == {"p1", "p2"}
        assert gate() == f"the tracker {WHERE} restarted; 2 phone(s) registering again"
        done[0]("p1")
        assert gate() is not None and opened == []
        done[0]("p2")
        done[0]("p2")  # a second word about it changes nothing
        assert gate() is None and opened == [1]

    def test_a_relaunch_that_ends_at_once_is_not_left_pending(self) -> None:
        """A relaunch thread that ends before relaunch_all returned still opens the gate."""
        gate = TrackerGate(lambda: True, WHERE)

        def relaunch(on_done: Callable[[str], None]) -> set[str]:
            thread = threading.Thread(target=on_done, args=("p1",))
            thread.start()
            thread.join(0.05)  # blocked on the gate's lock until the set is known
            return {"p1"}

        gate.relaunch(relaunch)
        # The thread gets the lock once relaunch() returned, and finds p1 pending.
        wait_until(lambda: gate() is None, 5.0, "the gate open")


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
