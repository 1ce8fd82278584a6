"""Tests for farm.tvm.tracker: the supervised tracker process and its summary."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.clock import wait_until
from farm.errors import TrackerUnreachable
from farm.netaddr import free_port
from farm.procs import group_alive
from farm.tvm.tracker import (
    QueueInfo,
    ServerInfo,
    TrackerProcess,
    parse_summary,
    ping,
    summary,
)


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A loopback listener that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


class TestParseSummary:
    def test_stock_app_string_port(self) -> None:
        """The stock app's port, sent as a string, becomes an int."""
        raw = {
            "server_info": [{"key": "server:android", "addr": ["127.0.0.1", "5001"]}],
            "queue_info": {"android": {"free": 1, "pending": 0}},
        }
        parsed = parse_summary(raw)
        assert parsed.servers == (ServerInfo("android", "127.0.0.1", 5001),)
        assert parsed.queue("android") == QueueInfo("android", 1, 0)

    def test_unusable_entries_are_skipped(self) -> None:
        """Entries that are not servers or have no address are left out."""
        raw = {
            "server_info": [
                {"key": "client:x", "addr": ["1.2.3.4", 1]},
                {"key": "server:a", "addr": [None, 5001]},
                {"key": "server:b", "addr": ["1.2.3.4", "port"]},
                {"key": "server:c", "addr": ["1.2.3.4", 9000]},
            ],
        }
        assert parse_summary(raw).servers == (ServerInfo("c", "1.2.3.4", 9000),)

    def test_unknown_queue_is_empty(self) -> None:
        """A key the tracker never saw has an empty queue."""
        assert parse_summary({}).queue("nope") == QueueInfo("nope", 0, 0)

    def test_servers_for_filters_by_key(self) -> None:
        """servers_for returns only the servers of that key."""
        raw = {
            "server_info": [
                {"key": "server:a", "addr": ["h", 1]},
                {"key": "server:b", "addr": ["h", 2]},
            ]
        }
        assert parse_summary(raw).servers_for("b") == (ServerInfo("b", "h", 2),)


class TestSummary:
    def test_refused_port_raises(self) -> None:
        """Nothing listening: TrackerUnreachable naming the address."""
        port = free_port()
        with pytest.raises(TrackerUnreachable) as info:
            summary("127.0.0.1", port, timeout_s=2)
        assert info.value.port == port

    def test_silent_peer_raises_within_deadline(self, silent_listener: int) -> None:
        """A peer that never answers fails after timeout_s, not later."""
        started = time.monotonic()
        with pytest.raises(TrackerUnreachable):
            summary("127.0.0.1", silent_listener, timeout_s=0.5)
        assert time.monotonic() - started < 2.0

    def test_lists_a_lan_phone(self, tracker: TrackerProcess, phones, key: str) -> None:
        """A lan phone's app shows up at 127.0.0.1 and its device port."""
        _, app = phones.start("lan", "10.0.2.2", tracker.port, key)
        assert wait_until(lambda: summary("127.0.0.1", tracker.port).servers_for(key), 30)
        assert summary("127.0.0.1", tracker.port).servers_for(key) == (
            ServerInfo(key, "127.0.0.1", app.device_port),
        )


class TestTrackerProcess:
    def test_start_and_stop_end_the_group(self, tmp_path: Path) -> None:
        """A started tracker answers PING; stop() leaves no process of its group."""
        process = TrackerProcess.start(log_path=tmp_path / "t.log")
        try:
            assert process.alive()
            assert ping(process.host, process.port)
        finally:
            process.stop()
        assert not process.alive()
        assert not group_alive(process.pid)
        assert not ping(process.host, process.port, timeout_s=0.5)

    def test_taken_port_fails_clearly(self) -> None:
        """A port held by another listener gives TrackerUnreachable, not a hang."""
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        stop = threading.Event()

        def refuse() -> None:
            holder.settimeout(0.1)
            while not stop.is_set():
                try:
                    conn, _ = holder.accept()
                    conn.close()
                except OSError:
                    continue

        thread = threading.Thread(target=refuse, daemon=True)
        thread.start()
        try:
            with pytest.raises(TrackerUnreachable):
                TrackerProcess.start(port=port, ready_timeout_s=10)
        finally:
            stop.set()
            thread.join()
            holder.close()
