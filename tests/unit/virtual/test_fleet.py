"""Fleet lifecycle without an adb server."""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path

import pytest

from farm.netaddr import free_port
from farm.virtual.fleet import Fleet, FleetError


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class TestStart:
    def test_failed_attach_stops_the_phones_and_the_loop(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def refuse(_self: Fleet, serial: str) -> None:
            raise FleetError(f"adb connect {serial}: refused")

        monkeypatch.setattr(Fleet, "connect", refuse)
        before = set(threading.enumerate())
        fleet = Fleet(2, adb_port=free_port(), data_dir=tmp_path)
        with pytest.raises(FleetError, match="refused"):
            fleet.start()
        assert [p.port for p in fleet.phones]
        assert not any(_listening(p.port) for p in fleet.phones)
        assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []


class TestRun:
    def test_a_timed_out_call_is_cancelled(self, tmp_path: Path) -> None:
        cancelled = threading.Event()

        async def forever() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        with Fleet(1, data_dir=tmp_path, attach=False) as fleet:
            with pytest.raises(TimeoutError):
                fleet.run(forever, timeout_s=0.1)
            assert cancelled.wait(5)

    def test_calls_before_start_fail(self, tmp_path: Path) -> None:
        with pytest.raises(FleetError, match="not started"):
            Fleet(1, data_dir=tmp_path, attach=False).call(lambda: None)
