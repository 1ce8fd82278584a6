"""Which adb server a farmd owns again after a killed one (farm.adb.owner), on real processes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from farm.adb.owner import ADB_PIDFILE_NAME, adopt_adb_server, listening_pid, record_adb_server
from farm.adb.server import AdbServer
from farm.netaddr import free_port


@pytest.fixture
def adb_server() -> Iterator[AdbServer]:
    """A real adb server on a free loopback port, started as farmd starts it; killed after."""
    server = AdbServer(port=free_port())
    assert server.ensure_running()
    pid = listening_pid(server.port)
    try:
        yield server
    finally:
        server.kill()
        if pid is not None and psutil.pid_exists(pid):
            psutil.Process(pid).kill()


def _record(data_dir: Path, pid: int, port: int) -> Path:
    path = data_dir / ADB_PIDFILE_NAME
    path.write_text(json.dumps({"pid": pid, "create_time": psutil.Process(pid).create_time(),
                                "port": port}), encoding="utf-8")
    return path


class TestAdoptAdbServer:
    def test_no_record_owns_nothing(self, tmp_path: Path) -> None:
        """Without adb-server.json nothing is owned (a person's server stays theirs)."""
        assert not adopt_adb_server(tmp_path, AdbServer(port=free_port()))

    def test_a_dead_or_foreign_process_is_not_owned_nor_killed(self, tmp_path: Path) -> None:
        """A record whose pid is gone, or is no adb server on the port, is removed; the live
        process it names is left alone."""
        path = _record(tmp_path, os.getpid(), free_port())
        assert not adopt_adb_server(tmp_path, AdbServer(port=free_port()))
        assert not path.exists()
        assert psutil.Process(os.getpid()).is_running()
        path.write_text(json.dumps({"pid": 2**22 + 17, "create_time": 1.0, "port": 5037}))
        assert not adopt_adb_server(tmp_path, AdbServer(port=5037))
        assert not path.exists()

    def test_its_server_on_our_port_is_owned_on_another_port_ended(
        self, tmp_path: Path, adb_server: AdbServer
    ) -> None:
        """The recorded server on our port is ours again (the record stays); once farmd's
        adb.port changed, nobody would end it, so it is ended."""
        record_adb_server(tmp_path, adb_server)
        pid = listening_pid(adb_server.port)
        assert pid is not None
        assert adopt_adb_server(tmp_path, adb_server)
        assert (tmp_path / ADB_PIDFILE_NAME).is_file()

        server = psutil.Process(pid)
        assert not adopt_adb_server(tmp_path, AdbServer(port=free_port()))
        gone, _ = psutil.wait_procs([server], timeout=10)
        assert gone, "the server on the old port still runs"
        assert not (tmp_path / ADB_PIDFILE_NAME).exists()
