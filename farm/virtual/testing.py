"""Test helpers that ship with farm (like structlog's ``testing.py``).

* :func:`adb_server` runs a private adb server on a free loopback port with
  its own ``$HOME`` (so its host key ``adbkey`` is private too) and makes sure
  it ends.
* :func:`fleet` runs virtual phones attached to that server and waits until
  every one is listed as ``device``.
* :func:`farm.clock.wait_until` polls a predicate against a deadline instead of sleeping
  and hoping.

``tests/fleet/conftest.py`` exposes them as pytest fixtures.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from farm.adb.server import bundled_adb
from farm.clock import wait_until
from farm.netaddr import free_port
from farm.procs import signal_group
from farm.virtual.contracts import NetworkMode
from farm.virtual.fleet import Fleet

SERVER_START_TIMEOUT_S = 20.0
SERVER_STOP_TIMEOUT_S = 10.0
ATTACH_TIMEOUT_S = 30.0
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
        process = subprocess.Popen(
            argv,
            env=env,
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
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
