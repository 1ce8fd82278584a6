"""The pool's gate against a real tracker: who gets through, and the held mark it keeps.

The "app" is a stand-in TCP server that answers TVM's RPC handshake and records
the key it was sent; the phone is registered under its own key by a plain
tracker connection, as the relay makes the app do.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from device_states import put_state

from farm.aio import LoopThread
from farm.clock import FakeClock, wait_until
from farm.fleet.pool import Pool
from farm.queue import Assignment, DeviceState, Store
from farm.queue.spec import DeviceSelection
from farm.tvm.protocol import (
    RPC_CODE_MISMATCH,
    RPC_MAGIC,
    TrackerCode,
    call,
    open_tracker,
    recv_int32,
)
from farm.tvm.relay import Offer
from farm.tvm.tracker import TrackerProcess, summary

NOW = datetime(2025, 1, 1, tzinfo=UTC)
POOL_KEY = "android"
APP_KEY = "android-p1"
APP_MATCHKEY = "android-p1:0.5"


@dataclass
class App:
    """A stand-in RPC app: answers the handshake, records each client's key, then echoes."""

    port: int = 0
    keys: list[str] = field(default_factory=list)

    async def on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one client as the app does: magic, then its key back; then echo."""
        await reader.readexactly(4)
        size = struct.unpack("<i", await reader.readexactly(4))[0]
        key = (await reader.readexactly(size)).decode()
        self.keys.append(key)
        writer.write(struct.pack("<i", RPC_MAGIC) + struct.pack("<i", size) + key.encode())
        while data := await reader.read(4096):
            writer.write(data)
        writer.close()


@dataclass
class Bench:
    """A pool with one phone p1 offered, and everything it talks to."""

    pool: Pool
    store: Store
    app: App
    tracker: TrackerProcess


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    """A real tracker, a store with p1 ready, p1's app registered, and a pool around them."""
    loop = LoopThread()
    with TrackerProcess.start(log_path=tmp_path / "tracker.log") as tracker, \
            Store(f"sqlite:///{tmp_path / 'farm.db'}") as store:
        store.upsert_device("p1", NOW, {"soc": "SM8150"})
        put_state(store, "p1", DeviceState.READY, "test", NOW)
        app = App()
        server = loop.run(asyncio.start_server(app.on_client, "127.0.0.1", 0))
        app.port = int(server.sockets[0].getsockname()[1])
        registration = open_tracker(tracker.host, tracker.port, time.monotonic() + 5)
        call(registration, [TrackerCode.UPDATE_INFO.value,
                            {"key": f"server:{APP_KEY}", "addr": ["127.0.0.1", app.port]}],
             time.monotonic() + 5)
        call(registration, [TrackerCode.PUT.value, APP_KEY, [app.port, APP_MATCHKEY], None],
             time.monotonic() + 5)
        offer = Offer(APP_KEY, "127.0.0.1", app.port, APP_MATCHKEY)
        keys = {POOL_KEY: None, "sm8150": DeviceSelection(soc="SM8150"),
                "sm8450": DeviceSelection(soc="SM8450")}
        pool = Pool(keys, (tracker.host, tracker.port), store, FakeClock(NOW), loop,
                    lambda: {"p1": offer})
        try:
            yield Bench(pool, store, app, tracker)
        finally:
            pool.close()
            registration.close()
            loop.call(server.close)
            loop.close()


def ticket(bench: Bench, key: str = POOL_KEY) -> tuple[str, int, str]:
    """``request(key)`` at the tracker: the (host, port, matchkey) it hands out."""
    sock = open_tracker(bench.tracker.host, bench.tracker.port, time.monotonic() + 5)
    with sock:
        reply = call(sock, [TrackerCode.REQUEST.value, key, "test", 0], time.monotonic() + 5)
    host, port, matchkey = reply[1]
    return host, port, matchkey


def connect(host: str, port: int, key: str) -> tuple[socket.socket, int]:
    """Open an RPC client connection presenting ``key``; returns it and the code answered."""
    sock = socket.create_connection((host, port), timeout=5)
    data = key.encode()
    sock.sendall(struct.pack("<i", RPC_MAGIC) + struct.pack("<i", len(data)) + data)
    return sock, recv_int32(sock, time.monotonic() + 5)


class TestGate:
    def test_an_issued_ticket_reaches_the_app_with_its_matchkey_and_holds_the_phone(
        self, bench: Bench
    ) -> None:
        """The client's key reaches the app rewritten; the phone is held, then freed."""
        assert bench.pool.sync() == {"p1"}
        host, port, matchkey = ticket(bench)
        assert matchkey.startswith(f"{POOL_KEY}:")
        sock, code = connect(host, port, f"client:{matchkey} -timeout=60")
        with sock:
            assert code == RPC_MAGIC
            assert bench.app.keys == [f"client:{APP_MATCHKEY} -timeout=60"]
            held = bench.store.get_device("p1").held_outside  # type: ignore[union-attr]
            assert held is not None and held.endswith(f"(pool key {POOL_KEY})")
            assert bench.pool.in_session("p1")
            assert bench.pool.sync() == set()  # held: withdrawn
        wait_until(lambda: bench.store.get_device("p1").held_outside is None,  # type: ignore[union-attr]
                   10.0, "the hold cleared")
        assert bench.pool.sync() == {"p1"}

    def test_a_matchkey_the_pool_did_not_issue_is_refused(self, bench: Bench) -> None:
        """A made-up matchkey gets RPC_CODE_MISMATCH and never reaches the app."""
        bench.pool.sync()
        host, port, _ = ticket(bench)
        sock, code = connect(host, port, f"client:{POOL_KEY}:forged")
        sock.close()
        assert code == RPC_CODE_MISMATCH and bench.app.keys == []

    def test_a_phone_a_job_claimed_since_the_sync_is_refused(self, bench: Bench) -> None:
        """The gate's mark loses to a claim made after the last sync: the client is refused."""
        assert bench.pool.sync() == {"p1"}
        host, port, matchkey = ticket(bench)
        job_id = bench.store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        assert bench.store.claim([Assignment(job_id, ("p1",), 60.0)], NOW)
        sock, code = connect(host, port, f"client:{matchkey}")
        sock.close()
        assert code == RPC_CODE_MISMATCH and bench.app.keys == []
        assert bench.store.get_device("p1").held_outside is None  # type: ignore[union-attr]
        assert bench.pool.sync() == set()  # busy: withdrawn

    def test_a_selection_key_offers_only_matching_phones(self, bench: Bench) -> None:
        """p1 (SM8150) serves the pool key and the sm8150 key, not the sm8450 one; either works."""
        bench.pool.sync()
        queues = summary(bench.tracker.host, bench.tracker.port)
        assert [queues.queue(k).free for k in (POOL_KEY, "sm8150", "sm8450")] == [1, 1, 0]
        host, port, matchkey = ticket(bench, "sm8150")
        sock, code = connect(host, port, f"client:{matchkey}")
        with sock:
            assert code == RPC_MAGIC
            held = bench.store.get_device("p1").held_outside  # type: ignore[union-attr]
            assert held is not None and held.endswith("(pool key sm8150)")
            bench.pool.sync()  # withdrawn: the tracker drops its other entry too
            wait_until(lambda: summary(bench.tracker.host,
                                       bench.tracker.port).queue(POOL_KEY).free == 0,
                       10.0, "the pool key's entry dropped")
