"""A new tracker: the fleet serves every device again, one owner, no claimed session cut.

On the real store with a fleet manager without phones: the controller's serve
is recorded (it would launch an app) and the tracker's summary lists what the
test says, so the real reconcile, serve task and registration wait run.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest

from farm.clock import FakeClock, wait_until
from farm.fleet.manager import FleetManager
from farm.queue import DeviceState, Store
from farm.queue.scheduler import Assignment
from farm.tvm.tracker import ServerInfo, TrackerSummary

MakeManager = Callable[..., FleetManager]


def phone(store: Store, clock: FakeClock, serial: str, *, busy: bool = False) -> str:
    """A ready phone, or a busy one (a gemm job claimed it); its serial."""
    store.upsert_device(serial, clock.now(), {"abi": "arm64-v8a", "sdk": 34})
    assert store.move_device(serial, DeviceState.READY, "test", clock.now(),
                             expect_state=DeviceState.DISCOVERED)
    if busy:
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 16}}, clock.now())
        assert store.claim([Assignment(job_id, (serial,), 60.0)], clock.now())
    return serial


class _Fleet:
    """The manager with its apps recorded: ``served`` lists each serve; the tracker lists them."""

    def __init__(self, manager: FleetManager) -> None:
        self.manager = manager
        self.served: list[str] = []
        self.hold = threading.Event()  # set: a serve waits until released
        self.release = threading.Event()
        self.listed: set[str] = set()

        def serve(serial: str, key: str) -> None:
            self.served.append(serial)
            if self.hold.is_set():
                self.release.wait(5.0)
            self.listed.add(key)

        def summary(max_age_s: float = 0.0, quiet: bool = False) -> TrackerSummary:
            return TrackerSummary(tuple(ServerInfo(k, "127.0.0.1", 1) for k in self.listed), ())

        manager.android.serve = serve  # type: ignore[method-assign]
        manager.tracker_summary = summary  # type: ignore[method-assign]

    def idle(self) -> None:
        wait_until(lambda: not any(p.busy_task for p in self.manager.phones.values()), 5.0,
                   "the serve tasks ended")


@pytest.fixture
def fleet(store: Store, clock: FakeClock, make_manager: MakeManager) -> _Fleet:
    return _Fleet(make_manager(store, clock))


class TestTrackerRestarted:
    def test_every_server_is_served_again_but_a_busy_one_in_session(
        self, store: Store, clock: FakeClock, fleet: _Fleet
    ) -> None:
        """Ready and sessionless busy phones are served again; a job's open session is kept.

        The busy phone without a session is a job claimed just before the old
        tracker died: its app, registered with the dead tracker only, would
        leave the job's request unanswered (``no server of key ... within 60 s``).
        """
        manager = fleet.manager
        ready, idle, serving = (phone(store, clock, "R1"), phone(store, clock, "B1", busy=True),
                                phone(store, clock, "B2", busy=True))
        key = manager.runtime(serving).key
        with socket.create_server(("127.0.0.1", 0)) as server, \
                socket.create_connection(server.getsockname()):  # the job's session
            host, port = server.getsockname()
            manager.tracker_look.last_servers = {key: ServerInfo(key, host, port)}  # as it gave it
            assert sorted(manager.tracker_restarted()) == sorted([ready, idle, serving])
            fleet.idle()
        assert sorted(fleet.served) == sorted([ready, idle])
        assert manager.unjoined() == 0
        assert all(d.serving_key is None for d in store.list_devices() if d.serial == serving)
        assert manager.serving.reconcile(store.list_devices()) == []  # each serves this tracker

    def test_the_gate_counts_a_phone_until_its_serve_registered(
        self, store: Store, clock: FakeClock, fleet: _Fleet
    ) -> None:
        """While its serve runs a phone is unjoined: the gate waits for it until it registered."""
        manager = fleet.manager
        ready = phone(store, clock, "R1")
        assert manager.unjoined() == 0
        fleet.hold.set()
        manager.tracker_restarted()
        wait_until(lambda: fleet.served == [ready], 5.0, "the serve started")
        assert manager.unjoined() == 1
        fleet.release.set()
        fleet.idle()
        assert manager.unjoined() == 0

    def test_a_phone_a_task_runs_for_is_served_by_the_next_reconcile(
        self, store: Store, clock: FakeClock, fleet: _Fleet
    ) -> None:
        """One owner per phone: a restart that finds a task running serves once it ended."""
        manager = fleet.manager
        serial = phone(store, clock, "R1")
        release = threading.Event()
        assert manager.submit(serial, lambda s: release.wait(5.0) and None)
        assert manager.tracker_restarted() == []
        assert manager.unjoined() == 1
        release.set()
        wait_until(lambda: not manager.runtime(serial).busy_task, 5.0, "the task ended")
        assert fleet.served == []
        assert manager.serving.reconcile(store.list_devices()) == [serial]
        fleet.idle()
        assert fleet.served == [serial] and manager.unjoined() == 0
