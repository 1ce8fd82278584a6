"""Tests for farm.boards.commands: argv lists, and the start/stop scripts run for real by sh.

The scripts are run with the local ``sh`` (what a board's login shell runs them
with), in a work folder whose name a shell would misread, so the quoting is
checked by execution rather than by reading the string.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from farm.boards import commands
from farm.clock import wait_until
from farm.config import BoardSettings
from farm.controllers.board import uses_forward
from farm.procs import group_alive, signal_group

NASTY = "w d $(touch pwned) `touch pwned2`; 'q'"


def _board(tmp_path: Path, **overrides: object) -> BoardSettings:
    fields: dict[str, object] = {"name": "b1", "host": "h", "user": "u",
                                 "work_dir": str(tmp_path / NASTY)}
    return BoardSettings.model_validate(fields | overrides)


def _sh(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    assert argv[:2] == ["sh", "-c"]
    return subprocess.run(argv, cwd=cwd, capture_output=True, timeout=30, check=False)


class TestServerArgv:
    def test_python_server(self, tmp_path):
        """The Python server registers at the tracker under the key, on TVM's port range."""
        argv = commands.server_argv(_board(tmp_path, python="/opt/py/bin/python3"),
                                    "10.0.0.2:9190", "board-b1")
        assert argv[:3] == ["/opt/py/bin/python3", "-m", "tvm.exec.rpc_server"]
        assert argv[argv.index("--tracker") + 1] == "10.0.0.2:9190"
        assert argv[argv.index("--key") + 1] == "board-b1"

    def test_cpp_server(self, tmp_path):
        """A tvm_rpc path runs its server command with --name=value options."""
        argv = commands.server_argv(_board(tmp_path, server="/opt/tvm/tvm_rpc"),
                                    "10.0.0.2:9190", "k")
        assert argv[:2] == ["/opt/tvm/tvm_rpc", "server"]
        assert "--tracker=10.0.0.2:9190" in argv and "--key=k" in argv

    def test_runtime_check(self, tmp_path):
        """Python boards import the RPC server module; C++ boards test the binary."""
        assert commands.runtime_check_argv(_board(tmp_path))[1:3] == ["-c", (
            "import tvm, tvm.exec.rpc_server; print(tvm.__version__)")]
        assert commands.runtime_check_argv(_board(tmp_path, server="/x/tvm_rpc")) == [
            "test", "-x", "/x/tvm_rpc"]

    def test_reboot(self, tmp_path):
        """Root reboots directly; anyone else through passwordless sudo."""
        assert commands.reboot_argv(_board(tmp_path, user="root")) == ["reboot"]
        assert commands.reboot_argv(_board(tmp_path)) == ["sudo", "-n", "reboot"]


class TestStartStopScripts:
    def test_start_detaches_and_stop_kills_the_group(self, tmp_path):
        """The server leads its own group, named by the pidfile; stop kills the whole group."""
        board = _board(tmp_path)
        server = ["sh", "-c", "sleep 60 & sleep 60"]  # a server with a forked worker
        result = _sh(commands.start_server_argv(board, server), tmp_path)
        assert result.returncode == 0, result.stderr
        pid = int(result.stdout.decode().strip())
        try:
            work = Path(board.work_dir)
            assert (work / commands.PIDFILE).read_text().strip() == str(pid)
            assert os.getpgid(pid) == pid
            assert not list(tmp_path.glob("pwned*")) and not list(work.glob("pwned*"))
            stopped = _sh(commands.stop_server_argv(board), tmp_path)
            assert stopped.returncode == 0, stopped.stderr
            assert wait_until(lambda: not group_alive(pid), 10)
            assert not (work / commands.PIDFILE).exists()
        finally:
            signal_group(pid)

    def test_restart_replaces_the_old_server(self, tmp_path):
        """Starting again ends the server the pidfile names before starting the new one."""
        board = _board(tmp_path)
        first = int(_sh(commands.start_server_argv(board, ["sleep", "60"]), tmp_path).stdout)
        second = int(_sh(commands.start_server_argv(board, ["sleep", "60"]), tmp_path).stdout)
        try:
            assert first != second
            assert wait_until(lambda: not group_alive(first), 10)
            assert group_alive(second)
        finally:
            signal_group(first)
            signal_group(second)

    def test_stop_without_server(self, tmp_path):
        """Stopping a board that never ran a server succeeds."""
        assert _sh(commands.stop_server_argv(_board(tmp_path)), tmp_path).returncode == 0

    @pytest.mark.parametrize("running", [False, True])
    def test_health_reports_the_server(self, tmp_path, running):
        """The health script's last section says whether the pidfile's group lives."""
        board = _board(tmp_path, sysfs_root=str(tmp_path / "no sys"))
        pid = None
        if running:
            pid = int(_sh(commands.start_server_argv(board, ["sleep", "60"]), tmp_path).stdout)
        try:
            out = _sh(commands.health_argv(board), tmp_path).stdout
            parts = commands.sections(out, 6)
            assert parts[:2] == ["", ""]  # no thermal zones under that sysfs root
            assert parts[5] == ("running" if running else "stopped")
        finally:
            if pid is not None:
                signal_group(pid)


class TestTrackerVia:
    def test_custom_addr_for_forwarded_servers(self, tmp_path):
        """A server dialling through a forward reports the board's own address."""
        python = commands.server_argv(_board(tmp_path), "127.0.0.1:40001", "k", "10.0.0.31")
        assert python[-2:] == ["--custom-addr", "10.0.0.31"]
        cpp = commands.server_argv(_board(tmp_path, server="/x/tvm_rpc"), "127.0.0.1:1", "k",
                                   "10.0.0.31")
        assert cpp[-1] == "--custom-addr=10.0.0.31"

    @pytest.mark.parametrize(("via", "board_host", "tracker_host", "expected"), [
        ("auto", "10.0.0.31", "127.0.0.1", True),   # the board would dial itself
        ("auto", "10.0.0.31", "10.0.0.2", False),
        ("auto", "127.0.0.1", "127.0.0.1", False),  # a local (virtual) board
        ("direct", "10.0.0.31", "127.0.0.1", False),
        ("forward", "127.0.0.1", "10.0.0.2", True),
    ])
    def test_uses_forward(self, tmp_path, via, board_host, tracker_host, expected):
        """auto forwards only when a remote board would dial a loopback tracker address."""
        board = _board(tmp_path, tracker_via=via, host=board_host)
        assert uses_forward(board, tracker_host) is expected
