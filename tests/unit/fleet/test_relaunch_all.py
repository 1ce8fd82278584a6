"""A new tracker: which apps farmd relaunches, so that no claimed job asks for an unlisted key."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

from farm.clock import FakeClock, wait_until
from farm.fleet.manager import FleetManager
from farm.queue import DeviceState, Store
from farm.queue.scheduler import Assignment
from farm.tvm.tracker import ServerInfo

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


class TestRelaunchAll:
    def test_ready_and_sessionless_busy_phones_are_relaunched_a_session_is_kept(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A busy phone whose client holds a TCP session keeps its app; the rest are relaunched."""
        manager = make_manager(store, clock)
        relaunched: list[str] = []
        manager._relaunch = lambda serial: relaunched.append(serial) or True  # type: ignore[method-assign]
        ready, idle, serving = (phone(store, clock, "R1"), phone(store, clock, "B1", busy=True),
                                phone(store, clock, "B2", busy=True))
        key = manager.runtime(serving).key
        done: list[tuple[str, bool]] = []
        with socket.create_server(("127.0.0.1", 0)) as server, \
                socket.create_connection(server.getsockname()):  # the job's session
            host, port = server.getsockname()
            manager._last_servers = {key: ServerInfo(key, host, port)}  # as the tracker gave it
            started = manager.relaunch_all("tracker restarted",
                                           on_done=lambda s, ok: done.append((s, ok)))
        assert started == {s: manager.runtime(s).key for s in (ready, idle)}
        wait_until(lambda: len(done) == 2, 5.0, "both relaunches ended")
        assert sorted(relaunched) == sorted([ready, idle])
        assert sorted(done) == [(idle, True), (ready, True)]

    def test_a_phone_a_task_runs_for_is_relaunched_after_it(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A relaunch that finds a provisioning running is queued behind it, not dropped."""
        manager = make_manager(store, clock)
        serial = phone(store, clock, "R1")
        order: list[str] = []
        release = threading.Event()
        manager._relaunch = lambda s: order.append("relaunch") or True  # type: ignore[method-assign]
        assert manager.submit(serial, lambda s: (release.wait(5.0), order.append("provision")))
        started = manager.relaunch_all("tracker restarted")
        assert started == {serial: manager.runtime(serial).key} and order == []
        release.set()
        wait_until(lambda: not manager.runtime(serial).busy_task, 5.0, "the tasks ended")
        assert order == ["provision", "relaunch"]
