"""farmd as a process: its files private under a 022 umask, its adb server on loopback, its stop."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from farm.adb.owner import ADB_PIDFILE_NAME
from farm.adb.server import AdbServer
from farm.api.local import LISTING_SOCKET
from farm.clock import wait_until
from farm.netaddr import free_port
from farm.runner.pidfile import PIDFILE_NAME, farmd_status
from farm.testing import log_events

pytestmark = pytest.mark.fleet

START_DEADLINE_S = 120.0
STOP_DEADLINE_S = 60.0
SERVER_GONE_S = 10.0  # after farmd exited: its stop ended the server already


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _listener_pid(port: int) -> int | None:
    """The pid of the process listening on TCP ``port``, if any."""
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            return conn.pid
    return None


class FarmdRuns:
    """Real farmd processes (no phones) of one config, each under umask 022.

    Attributes:
        data_dir: their data folder.
        adb_port: the port of the adb server farmd starts.
    """

    def __init__(self, tmp_path: Path) -> None:
        self.data_dir = tmp_path / "data"
        self.data_dir.mkdir(mode=0o755)  # as an older farm left it
        self.data_dir.chmod(0o755)
        self.adb_port = free_port()
        self.config = tmp_path / "farm.toml"
        self.config.write_text(
            f'data_dir = "{self.data_dir}"\n[adb]\nport = {self.adb_port}\n'
            f"[tracker]\nport = {free_port()}\n[metrics]\nenabled = false\n"
            "[api]\nenabled = false\n")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("FARM_")}
        self.env.update(HOME=str(tmp_path / "home"), ADB_USB="0", ADB_EMU="0")
        (tmp_path / "home").mkdir()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: dict[int, Path] = {}
        self._tmp_path = tmp_path

    def start(self) -> int:
        """Start one farmd; returns its pid. Its output goes to :meth:`log_tail`'s file."""
        argv = [sys.executable, "-c", "from farm.daemon import main; main()",
                "--config", str(self.config), "--json-logs"]
        log_path = self._tmp_path / f"farmd-{len(self.processes)}.log"
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                                    stdout=log_file, stderr=subprocess.STDOUT,
                                    start_new_session=True,
                                    preexec_fn=lambda: os.umask(0o022))  # noqa: PLW1509 (no threads yet)
        self.processes.append(proc)
        self.logs[proc.pid] = log_path
        return proc.pid

    def log_tail(self, pid: int, lines: int = 15) -> str:
        """The last ``lines`` lines farmd ``pid`` printed (for a failure's message)."""
        return "\n".join(self.logs[pid].read_text(errors="replace").splitlines()[-lines:])

    def wait_started(self, pid: int, what: str) -> None:
        """Wait until farmd ``pid`` started; fail at once, with its output, if it exited."""
        try:
            state = wait_until(lambda: _start_state(self.data_dir, pid, self.logs[pid]),
                               START_DEADLINE_S, what)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}; farmd printed:\n{self.log_tail(pid)}") from exc
        assert state == "started", f"{what}: farmd exited during start; it printed:\n" + \
            self.log_tail(pid)

    def wait_stopped(self, pid: int, within_s: float = STOP_DEADLINE_S) -> int:
        """Wait until farmd ``pid`` (sent SIGTERM) exited; its exit code.

        Raises:
            AssertionError: it still ran after ``within_s`` (with its output).
        """
        proc = next(p for p in self.processes if p.pid == pid)
        try:
            return proc.wait(within_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"farmd {pid} still runs {within_s:.0f} s after "
                                 f"SIGTERM; it printed:\n{self.log_tail(pid)}") from None

    def close(self) -> None:
        """End every farmd started and the adb server on the port, in case a test failed."""
        for proc in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        server_pid = _listener_pid(self.adb_port)
        subprocess.run(AdbServer(port=self.adb_port).argv("kill-server"), env=self.env,
                       capture_output=True, timeout=30, check=False)
        if server_pid is not None:
            with contextlib.suppress(psutil.NoSuchProcess):
                server = psutil.Process(server_pid)
                _, alive = psutil.wait_procs([server], timeout=10)
                for process in alive:
                    process.kill()


@pytest.fixture
def farmd_runs(tmp_path: Path) -> Iterator[FarmdRuns]:
    """:class:`FarmdRuns` of this test, all ended after it."""
    runs = FarmdRuns(tmp_path)
    try:
        yield runs
    finally:
        runs.close()


@pytest.fixture
def farmd(farmd_runs: FarmdRuns) -> tuple[FarmdRuns, int]:
    """A real farmd process (no phones) under umask 022; (its runs, its pid).

    farmd starts its adb server with ``adb start-server`` (a daemon, not its
    child) and ends it when it stops; the fixture ends it too, in case a test failed.
    """
    return farmd_runs, farmd_runs.start()


def _start_state(data_dir: Path, pid: int, log_path: Path) -> str | None:
    """"started" once farmd ``pid`` logged ``farmd_started``, "exited" if it ended first.

    Its files are there well before: the tracker's import of TVM alone takes
    half a minute on a loaded 2-core host, and the tests look at what a started
    farmd has (its listing socket, its adb server) and how it stops. None while
    it still starts.
    """
    if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
        return "exited"
    if farmd_status(data_dir).pid != pid:
        return None  # farmd.json still names a killed predecessor
    return "started" if log_events(log_path, "farmd_started") else None


class TestFarmdPrivacy:
    """What farmd leaves on disk and on the network."""

    def test_files_are_private_and_adb_listens_on_loopback_only(
        self, farmd: tuple[FarmdRuns, int]
    ) -> None:
        """Data folder 0700, its files 0600, the adb server it started has no listener
        beyond loopback (no mDNS on 0.0.0.0:5353) and ends with farmd on SIGTERM."""
        runs, pid = farmd
        data_dir, adb_port = runs.data_dir, runs.adb_port
        runs.wait_started(pid, "farmd started")
        assert _mode(data_dir) == 0o700
        assert _mode(data_dir / "runs") & 0o077 == 0
        for name in (PIDFILE_NAME, "farm.db", "runs/settings.json", "tracker.log", LISTING_SOCKET):
            assert _mode(data_dir / name) & 0o077 == 0, f"{name} is {oct(_mode(data_dir / name))}"

        server_pid = wait_until(lambda: _listener_pid(adb_port), START_DEADLINE_S,
                                "adb server listening")
        sockets = psutil.Process(int(server_pid)).net_connections(kind="inet")  # type: ignore[arg-type]
        bound = [(c.type, c.laddr.ip, c.laddr.port) for c in sockets
                 if c.laddr and (c.status == psutil.CONN_LISTEN or c.type == 2)]  # 2: SOCK_DGRAM
        assert bound, "the adb server listens somewhere"
        outside = [b for b in bound if not ipaddress.ip_address(b[1]).is_loopback]
        assert outside == [], f"adb server listens beyond loopback: {outside}"

        # Stopped by ``timeout`` or systemd (SIGTERM), farmd ends the server it started:
        # ``adb start-server`` daemonizes it, so farmd's process group going does not.
        server = psutil.Process(int(server_pid))  # type: ignore[arg-type]
        os.kill(pid, signal.SIGTERM)
        runs.wait_stopped(pid)
        gone, _ = psutil.wait_procs([server], timeout=SERVER_GONE_S)
        assert gone, f"adb server {server.pid} on port {adb_port} outlived farmd:\n" + \
            runs.log_tail(pid)


class TestFarmdKilledAdbServer:
    def test_next_farmd_owns_the_adb_server_a_killed_one_started(
        self, farmd_runs: FarmdRuns
    ) -> None:
        """kill -9 of farmd leaves its adb server running (a daemon, phones stay connected);
        the next farmd of the data folder owns it again, so its SIGTERM ends it."""
        data_dir = farmd_runs.data_dir
        first = farmd_runs.start()
        farmd_runs.wait_started(first, "first farmd started")
        server_pid = wait_until(lambda: _listener_pid(farmd_runs.adb_port), START_DEADLINE_S,
                                "adb server listening")
        assert (data_dir / ADB_PIDFILE_NAME).is_file()
        os.kill(first, signal.SIGKILL)  # farmd alone, not its group
        server = psutil.Process(int(server_pid))  # type: ignore[arg-type]
        assert server.is_running()

        second = farmd_runs.start()
        farmd_runs.wait_started(second, "second farmd started")
        assert _listener_pid(farmd_runs.adb_port) == server.pid  # reused, not started again
        os.kill(second, signal.SIGTERM)
        farmd_runs.wait_stopped(second)
        gone, _ = psutil.wait_procs([server], timeout=SERVER_GONE_S)
        assert gone, f"adb server {server.pid} a killed farmd started outlived the next farmd:\n" \
            + farmd_runs.log_tail(second)
        assert not (data_dir / ADB_PIDFILE_NAME).exists()


#: Within this a farmd sent SIGTERM while its tracker starts has exited; before it
#: waited for the tracker's 30 s (``TrackerProcess.start``'s ready timeout).
STOP_WHILE_STARTING_S = 20.0


def _tracker_child(pid: int) -> psutil.Process | None:
    """farmd ``pid``'s tracker process (``python -m farm.tvm.tracker``), once spawned."""
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "farm.tvm.tracker" in child.cmdline():
                    return child
    return None


class TestStopWhileStarting:
    def test_sigterm_while_the_tracker_starts_ends_farmd_at_once(
        self, farmd_runs: FarmdRuns, tmp_path: Path
    ) -> None:
        """SIGTERM while farmd waits for its tracker (here one whose start never ends, as
        a TVM import on a loaded host takes long) ends farmd within seconds, with exit 0,
        its tracker and the adb server it started ended too."""
        stall = tmp_path / "stall"
        stall.mkdir()
        (stall / "sitecustomize.py").write_text(
            "import sys, time\nif 'farm.tvm.tracker' in sys.orig_argv:\n    time.sleep(600)\n")
        farmd_runs.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(stall), farmd_runs.env.get("PYTHONPATH", "")) if p)
        pid = farmd_runs.start()
        tracker = wait_until(lambda: _tracker_child(pid), START_DEADLINE_S, "tracker spawned")
        server_pid = _listener_pid(farmd_runs.adb_port)
        assert server_pid is not None, "farmd starts its adb server before its tracker"
        server = psutil.Process(server_pid)

        os.kill(pid, signal.SIGTERM)
        code = farmd_runs.wait_stopped(pid, STOP_WHILE_STARTING_S)
        assert code == 0, farmd_runs.log_tail(pid)
        gone, _ = psutil.wait_procs([tracker, server], timeout=SERVER_GONE_S)  # type: ignore[list-item]
        left = f"tracker {tracker.is_running()}, adb server {server.is_running()}"  # type: ignore[union-attr]
        assert len(gone) == 2, f"left running: {left}\n{farmd_runs.log_tail(pid)}"
        assert log_events(farmd_runs.logs[pid], "farmd_stopped")
