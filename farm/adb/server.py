"""The host's one adb server: start, check, version, kill.

Real farms run exactly one adb server per host (every adb client talks to it on
TCP port 5037 by default); farm owns its lifecycle so that a dead server is
noticed and restarted by policy, not silently by a library.

The server farm starts listens on loopback only: its client port is bound to
127.0.0.1, and its mDNS discovery, which otherwise listens on UDP 0.0.0.0:5353
and [::]:5353 for adb-over-Wi-Fi phones, is turned off with ``ADB_MDNS=0``
(AOSP commit 043fbec6 "adb: add environment variables to disable usb,
emulators, mdns", ``adb/client/main.cpp``: ``init_mdns_transport_discovery()``
runs unless ``ADB_MDNS`` is ``0``). farm connects network phones itself
(``adb connect`` of ``adb.connect``), so it never needs discovery.
"""

from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import adbutils

from farm.errors import AdbServerDown

DEFAULT_ADB_PORT = 5037
START_TIMEOUT_S = 20.0
#: Environment of the adb server farm starts: mDNS discovery off (see the module doc).
SERVER_ENV = {"ADB_MDNS": "0"}


def bundled_adb() -> Path:
    """Path of the adb binary that adbutils ships (platform-tools build)."""
    return Path(adbutils.adb_path())


@dataclass
class AdbServer:
    """An adb server on 127.0.0.1:``port``, run from ``binary``.

    Attributes:
        port: the server's TCP port on loopback.
        binary: the adb executable; defaults to the one adbutils ships.
    """

    port: int = DEFAULT_ADB_PORT
    binary: Path | None = None

    def __post_init__(self) -> None:
        if self.binary is None:
            self.binary = bundled_adb()

    def argv(self, *args: str) -> list[str]:
        """The adb command line for this server: ``adb -P PORT ARGS...``."""
        return [str(self.binary), "-P", str(self.port), *args]

    def alive(self, timeout_s: float = 1.0) -> bool:
        """True if something accepts connections on the server's port."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout_s):
                return True
        except OSError:
            return False

    def ensure_running(self) -> bool:
        """Start the server if it is not running (``adb start-server``).

        Returns:
            True if this call started it (the caller owns it and ends it with
            :meth:`kill`), False if one was already serving the port.

        Raises:
            AdbServerDown: it did not come up within START_TIMEOUT_S.
        """
        if self.alive():
            return False
        try:
            proc = subprocess.run(
                self.argv("start-server"),
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_S,
                env=self._env(),
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise AdbServerDown(self.port, "start-server timed out") from exc
        if proc.returncode != 0 or not self.alive():
            raise AdbServerDown(self.port, (proc.stderr or proc.stdout).strip())
        return True

    def version(self) -> int:
        """The server's protocol version (41 for platform-tools 1.0.41).

        Raises:
            AdbServerDown: the server does not answer.
        """
        try:
            return int(self.client().server_version())
        except (adbutils.AdbError, OSError) as exc:
            raise AdbServerDown(self.port, str(exc)) from exc

    def kill(self, timeout_s: float = 10.0) -> None:
        """Stop the server (``adb kill-server``); a server already gone is fine."""
        if not self.alive():
            return
        subprocess.run(
            self.argv("kill-server"),
            capture_output=True,
            timeout=timeout_s,
            env=self._env(),
            check=False,
        )

    def client(self, socket_timeout_s: float = 10.0) -> adbutils.AdbClient:
        """An adbutils client bound to this server."""
        return adbutils.AdbClient(host="127.0.0.1", port=self.port, socket_timeout=socket_timeout_s)

    def _env(self) -> dict[str, str]:
        # The adb binary also reads ANDROID_ADB_SERVER_PORT; keep it consistent with -P.
        # ADB_MDNS=0: no mDNS listener on 0.0.0.0:5353 (see the module doc).
        return {**os.environ, "ANDROID_ADB_SERVER_PORT": str(self.port), **SERVER_ENV}
