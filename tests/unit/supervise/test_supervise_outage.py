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


def listing(keys: set[str] | None) -> Callable[[], set[str] | None]:
    """A stand-in for the new tracker's summary: the keys it lists now (None: no answer)."""
    return lambda: keys


class TestTrackerGate:
    def test_closed_while_the_tracker_process_is_dead(self) -> None:
        """A dead tracker is a reason at once, naming its address."""
        alive = [False]
        gate = TrackerGate(lambda: alive[0], WHERE, listing(set()))
        assert gate() == f"the tracker {WHERE} is down (farmd restarts it)"
        alive[0] = True
        assert gate() is None

    def test_closed_from_the_restart_until_the_relaunches_are_known(self) -> None:
        """A new tracker that answers before its relaunches started opens nothing."""
        gate = TrackerGate(lambda: True, WHERE, listing(set()))
        gate.restarting()
        assert gate() == f"the tracker {WHERE} is restarting"
        gate.relaunch(lambda _done: {})
        assert gate() is None

    def test_closed_until_the_new_tracker_lists_every_relaunched_key(self) -> None:
        """Relaunches that ended registered are not enough: the new tracker's summary decides."""
        opened: list[int] = []
        keys: set[str] = set()
        gate = TrackerGate(lambda: True, WHERE, lambda: keys, on_open=lambda: opened.append(1))
        done: list[Callable[[str, bool], None]] = []

        def relaunch(on_done: Callable[[str, bool], None]) -> dict[str, str]:
            done.append(on_done)
            return {"p1": "k1", "p2": "k2"}

        assert gate.relaunch(relaunch) == {"p1", "p2"}
        assert gate() == f"the tracker {WHERE} restarted; 2 phone(s) registering again"
        done[0]("p1", True)
        assert gate() is not None and opened == []
        done[0]("p2", True)
        done[0]("p2", True)  # a second word about it changes nothing
        assert opened == [1]
        assert gate() == f"the tracker {WHERE} restarted; 2 phone(s) not listed by it yet"
        keys.add("k1")
        assert gate() == f"the tracker {WHERE} restarted; 1 phone(s) not listed by it yet"
        keys.add("k2")
        assert gate() is None and not gate.waiting

    def test_a_failed_relaunch_is_not_waited_for(self) -> None:
        """A phone whose app did not register (now unhealthy) does not hold the farm."""
        gate = TrackerGate(lambda: True, WHERE, listing(None))
        done: list[Callable[[str, bool], None]] = []
        gate.relaunch(lambda on_done: (done.append(on_done), {"p1": "k1"})[1])
        done[0]("p1", False)
        assert gate() is None

    def test_a_relaunch_that_ends_at_once_is_not_left_pending(self) -> None:
        """A relaunch thread that ends before relaunch_all returned still opens the gate."""
        gate = TrackerGate(lambda: True, WHERE, listing({"k1"}))

        def relaunch(on_done: Callable[[str, bool], None]) -> dict[str, str]:
            thread = threading.Thread(target=on_done, args=("p1", True))
            thread.start()
            thread.join(0.05)  # blocked on the gate's lock until the set is known
            return {"p1": "k1"}

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
