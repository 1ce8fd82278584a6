"""Test helpers that ship with farm (like structlog's ``testing.py``).

* :func:`adb_server` runs a private adb server on a free loopback port with
  its own ``$HOME`` (so its host key ``adbkey`` is private too) and makes sure
  it ends.
* :func:`fleet` runs virtual phones attached to that server and waits until
  every one is listed as ``device``.
* :func:`rpc_app` runs one phone's RPC process under a private tracker, no adb.
* :func:`farm.clock.wait_until` polls a predicate against a deadline instead of sleeping
  and hoping.

``tests/fleet/conftest.py`` exposes them as pytest fixtures.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from farm.adb.server import bundled_adb
from farm.aio import LoopThread
from farm.clock import wait_until
from farm.netaddr import free_port
from farm.procs import signal_group, spawn, tied_to_parent
from farm.virtual.contracts import NetworkMode
from farm.virtual.fleet import Fleet
from farm.virtual.rpc_process import RpcProcess
from farm.virtual.throttle import QUIET_RT_PRIORITY, favour, realtime

SERVER_START_TIMEOUT_S = 20.0
SERVER_STOP_TIMEOUT_S = 10.0
ATTACH_TIMEOUT_S = 30.0
QUIET_NICE = -10  # autogroup nice of a quiet phone where real-time is not allowed
_POLL_INTERVAL_S = 0.05


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class AdbServerHandle:
    """A running private adb server.

    Attributes:
        port: its TCP port on 127.0.0.1.
        home: the ``$HOME`` it runs with; its host key lives in ``home/.android``.
        process: the ``adb nodaemon server`` process (its own process group).
    """

    port: int
    home: Path
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def public_key_path(self) -> Path:
        """The server's ``adbkey.pub`` (what a phone must trust)."""
        return self.home / ".android" / "adbkey.pub"

    def public_key(self) -> str:
        """The server's public key line, as a phone's ``adb_keys`` holds it."""
        return self.public_key_path.read_text().strip()

    def argv(self, *args: str) -> list[str]:
        """``adb -P PORT ARGS...``."""
        return [str(bundled_adb()), "-P", str(self.port), *args]

    def adb(self, *args: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run one adb command line against this server (never raises on exit code)."""
        return subprocess.run(
            self.argv(*args), capture_output=True, text=True, timeout=timeout_s, check=False
        )

    def devices(self) -> dict[str, str]:
        """``adb devices`` as ``{serial: state}``."""
        return device_states(self.port)


@contextlib.contextmanager
def adb_server(port: int | None = None) -> Iterator[AdbServerHandle]:
    """Run a private adb server; kill it (and its process group) on exit.

    The server runs in the foreground (``adb nodaemon server``) in its own
    session, so this process knows its pid and can be sure it ended; at exit
    ``adb kill-server`` asks it to stop, then the group is killed if it lingers.
    If this process dies first (even by SIGKILL), the server gets SIGKILL
    (:func:`farm.procs.tied_to_parent`).

    Args:
        port: the server's port; None picks a free one.

    Raises:
        TimeoutError: the server did not accept connections in time.
    """
    port = free_port() if port is None else port
    with tempfile.TemporaryDirectory(prefix="farm-adb-") as home_text:
        home = Path(home_text)
        env = {
            **os.environ,
            "HOME": str(home),
            "ANDROID_ADB_SERVER_PORT": str(port),
            # Hermetic: no real USB phones, no mDNS, no emulator scan on 5555. Without
            # USB the server also skips its up-to-3 s wait for the first USB scan
            # (AOSP adb/client/main.cpp, adb.cpp adb_wait_for_device_initialization).
            "ADB_USB": "0",
            "ADB_MDNS": "0",
            "ADB_EMU": "0",
        }
        env.pop("ADB_VENDOR_KEYS", None)
        argv = [str(bundled_adb()), "-P", str(port), "nodaemon", "server"]
        # Tied to this process: a test worker killed with SIGKILL leaves no server.
        process = spawn(
            tied_to_parent(argv),
            env=env,
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        handle = AdbServerHandle(port=port, home=home, process=process)
        try:
            wait_until(
                lambda: process.poll() is None and _accepts(port),
                SERVER_START_TIMEOUT_S,
                f"adb server on port {port} accepts connections",
            )
            wait_until(handle.public_key_path.exists, SERVER_START_TIMEOUT_S, "adb host key")
            yield handle
        finally:
            _stop_server(handle, env)


def _stop_server(handle: AdbServerHandle, env: dict[str, str]) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        subprocess.run(
            handle.argv("kill-server"),
            env=env,
            capture_output=True,
            timeout=SERVER_STOP_TIMEOUT_S,
            check=False,
        )
    with contextlib.suppress(subprocess.TimeoutExpired):
        handle.process.wait(timeout=SERVER_STOP_TIMEOUT_S)
    signal_group(handle.process.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        handle.process.wait(timeout=SERVER_STOP_TIMEOUT_S)


@contextlib.contextmanager
def fleet(
    n: int,
    network: NetworkMode = "lan",
    *,
    adb_port: int,
    data_dir: Path | None = None,
    reboot_away_s: float | None = None,
    base_port: int | None = None,
) -> Iterator[Fleet]:
    """Run ``n`` virtual phones attached to the adb server on ``adb_port``.

    Yields once ``adb devices`` lists every phone as ``device``; stops them
    (ending every process they started) on exit.

    Args:
        n: number of phones.
        network: ``lan`` or ``usb-only`` for every phone.
        adb_port: the adb server's port (e.g. ``adb_server().port``).
        data_dir: folder for the phones' storage; a temporary one if None.
        reboot_away_s: how long a reboot keeps a phone away (default: the spec's).
        base_port: first adbd port; None picks free ports.

    Raises:
        TimeoutError: a phone did not reach ``device`` within ATTACH_TIMEOUT_S.
    """
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="farm-phones-")))
        phones = Fleet(
            n,
            network=network,
            adb_port=adb_port,
            data_dir=data_dir,
            reboot_away_s=reboot_away_s,
            base_port=base_port,
        )
        stack.callback(phones.stop)
        phones.start()
        wait_until(
            lambda: all(states.get(s) == "device" for s in phones.serials)
            if (states := device_states(adb_port))
            else False,
            ATTACH_TIMEOUT_S,
            f"{n} phones listed as device",
        )
        yield phones


def device_states(adb_port: int) -> dict[str, str]:
    """``adb devices`` of the server on ``adb_port`` as ``{serial: state}``."""
    out = subprocess.run(
        [str(bundled_adb()), "-P", str(adb_port), "devices"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout
    states: dict[str, str] = {}
    for line in out.splitlines()[1:]:
        serial, _, state = line.partition("\t")
        if state:
            states[serial.strip()] = state.strip()
    return states


@dataclass
class RpcApp:
    """A virtual phone's RPC process (:mod:`farm.virtual.rpc_process`) serving a tracker key.

    Attributes:
        process: the RPC process; ``loop.run(process.set_speed(f))`` throttles it.
        loop: the event loop that drives it.
        tracker_host, tracker_port: the tracker it registered with.
        key: its tracker key.
        favoured: whether it got priority over the host's other work.
    """

    process: RpcProcess
    loop: LoopThread
    tracker_host: str
    tracker_port: int
    key: str
    favoured: bool

    def set_speed(self, factor: float) -> None:
        """Run the process group at ``factor`` of its speed (1.0: full speed)."""
        self.loop.run(self.process.set_speed(factor))


@contextlib.contextmanager
def rpc_app(work_dir: Path, key: str = "virtual", *, quiet: bool = False) -> Iterator[RpcApp]:
    """One lan virtual phone's RPC process, registered under ``key`` with a private tracker.

    No adb and no app lifecycle: the RPC process exactly as the phone's TVM RPC
    app runs it, for timing kernels through a real session (``bench/``, jobs'
    tests). Everything started ends on exit.

    A phone has its CPUs to itself; a host running other work does not. With
    ``quiet`` and where the host allows it (CAP_SYS_NICE), the process runs
    before the host's other work (real-time SCHED_RR,
    :func:`farm.virtual.throttle.realtime`; else an autogroup nice of -10), so
    its timings are a quiet phone's and the throttle knob slows it by what it
    is set to; :attr:`RpcApp.favoured` says whether that happened. Real-time
    work on every CPU starves the host (but for RT throttling's 5%): run
    kernels with one thread (``ThreadPoolParams(num_threads=1)``).

    Args:
        work_dir: folder for the logs and the session files.
        key: the tracker key.
        quiet: give the process priority over the host's other work.

    Raises:
        TrackerUnreachable: the tracker did not start.
        TimeoutError: the process did not register within ATTACH_TIMEOUT_S.
    """
    from farm.tvm.tracker import TrackerProcess, summary
    from farm.virtual.net import Net, parse_tcp_spec

    async def open_host(host_spec: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", parse_tcp_spec(host_spec))

    with contextlib.ExitStack() as stack:
        tracker = stack.enter_context(TrackerProcess.start(log_path=work_dir / "tracker.log"))
        loop = LoopThread(name="virtual-rpc-app")
        stack.callback(loop.close)
        net = Net("lan", open_host)
        stack.callback(lambda: loop.run(net.close()))
        process = loop.run(RpcProcess.start(
            net=net, tracker_host="10.0.2.2", tracker_port=tracker.port, key=key,
            log_path=work_dir / "rpc_process.log", work_dir=work_dir / "cache"))  # fmt: skip
        stack.callback(lambda: loop.run(process.stop()))
        favoured = quiet and (realtime(process.pid, QUIET_RT_PRIORITY)
                              or favour(process.pid, QUIET_NICE))
        wait_until(lambda: bool(summary("127.0.0.1", tracker.port).servers_for(key)),
                   ATTACH_TIMEOUT_S, f"the RPC process registered under {key!r}")
        yield RpcApp(process, loop, "127.0.0.1", tracker.port, key, favoured)
