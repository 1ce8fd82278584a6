"""adb calls with a real deadline, one lock per serial, and typed errors.

adbutils' ``timeout`` is a per-read socket timeout: a phone that trickles a byte
every few seconds never times out. Here every call runs under a deadline: a
timer shuts down every socket the call opened through the adb server, so the
blocked read returns and the call raises :class:`~farm.errors.AdbTimeout`.
The sockets are found by overriding ``make_connection``, the one place adbutils
opens them.
"""

from __future__ import annotations

import contextlib
import contextvars
import shlex
import socket
import stat
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import adbutils

from farm.adb.server import AdbServer
from farm.adb.stream import ShellStream
from farm.errors import AdbError, AdbServerDown, AdbTimeout, DeviceOffline

DEFAULT_TIMEOUT_S = 30.0

# Shell v2 packet ids (AOSP adb shell_protocol.h: kIdStdin..kIdWindowSizeChange).
_ID_STDOUT, _ID_STDERR, _ID_EXIT = 1, 2, 3
_SYNC_DATA_MAX_BYTES = 64 * 1024  # SYNC_DATA_MAX (AOSP adb file_sync_protocol.h)


@dataclass(frozen=True)
class ShellResult:
    """What a shell command printed and its exit status.

    Attributes:
        exit_code: 0..255, as ``sh`` on the phone returned it.
        stdout: raw bytes of stdout.
        stderr: raw bytes of stderr (shell v2 keeps them apart).
    """

    exit_code: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def err(self) -> str:
        """stderr decoded as UTF-8 (invalid bytes replaced)."""
        return self.stderr.decode("utf-8", errors="replace")


class _Deadline:
    """Shuts down every adb-server socket of one call when its time is up."""

    def __init__(self, timeout_s: float) -> None:
        self.expired = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout_s, self._fire)
        self._timer.daemon = True

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if not self.expired.is_set():
                return
        self._shutdown(sock)

    def _fire(self) -> None:
        with self._lock:
            self.expired.set()
            sockets = list(self._sockets)
        for sock in sockets:
            self._shutdown(sock)

    @staticmethod
    def _shutdown(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


_current_deadline: contextvars.ContextVar[_Deadline | None] = contextvars.ContextVar(
    "farm_adb_deadline", default=None
)


class _DeadlineClient(adbutils.AdbClient):
    """adbutils' client whose connections are watched by the active deadline.

    It also refuses to connect when the server is down, where adbutils would
    quietly run ``adb start-server`` on the default port: restarting the server
    is farmd's decision.
    """

    def __init__(self, server: AdbServer, socket_timeout_s: float) -> None:
        super().__init__(host="127.0.0.1", port=server.port, socket_timeout=socket_timeout_s)
        self._server = server

    def make_connection(self, timeout: float | None = None) -> adbutils.AdbConnection:
        if not self._server.alive():
            raise AdbServerDown(self._server.port)
        conn = super().make_connection(timeout=timeout)
        deadline = _current_deadline.get()
        if deadline is not None:
            deadline.watch(conn.conn)
        return conn


class Adb:
    """The commands farm sends to phones through the host's adb server.

    Every method takes ``timeout_s`` (a deadline for the whole call, never
    "wait forever") and holds the phone's lock while it runs, so that calls to
    one phone never interleave. Methods raise:

    Raises:
        AdbTimeout: the call passed its deadline.
        DeviceOffline: the phone is absent, offline or unauthorized.
        AdbError: the adb server refused the request.
        AdbServerDown: the adb server is not running.
    """

    def __init__(self, server: AdbServer, *, default_timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.server = server
        self.default_timeout_s = default_timeout_s
        self._client = _DeadlineClient(server, socket_timeout_s=default_timeout_s)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    # -- plumbing ---------------------------------------------------------------

    def lock(self, serial: str) -> threading.Lock:
        """The lock that serializes adb calls to ``serial``."""
        with self._locks_guard:
            return self._locks.setdefault(serial, threading.Lock())

    @contextlib.contextmanager
    def _call(
        self, serial: str, argv: Sequence[str], timeout_s: float | None, *, locked: bool = True
    ) -> Iterator[None]:
        timeout_s = self.default_timeout_s if timeout_s is None else timeout_s
        lock = self.lock(serial) if locked else None
        if lock is not None and not lock.acquire(timeout=timeout_s):
            raise AdbTimeout(serial, [*argv, "(waiting for the phone's lock)"], timeout_s)
        try:
            with _Deadline(timeout_s) as deadline:
                token = _current_deadline.set(deadline)
                try:
                    yield
                except (AdbServerDown, AdbTimeout, DeviceOffline, AdbError):
                    raise
                except (adbutils.AdbError, OSError, EOFError) as exc:
                    if deadline.expired.is_set():
                        raise AdbTimeout(serial, argv, timeout_s) from exc
                    raise _map_error(serial, argv, exc) from exc
                finally:
                    _current_deadline.reset(token)
            if deadline.expired.is_set():
                raise AdbTimeout(serial, argv, timeout_s)
        finally:
            if lock is not None:
                lock.release()

    def _device(self, serial: str) -> adbutils.AdbDevice:
        return adbutils.AdbDevice(self._client, serial=serial)

    # -- host services ---------------------------------------------------------------

    def devices_text(self, timeout_s: float | None = None) -> str:
        """The device list exactly as ``adb devices -l`` prints it.

        The server's ``host:devices-l`` reply lacks the client's header line
        (AOSP ``client/commandline.cpp`` prints it), so it is added here. Parse
        the text with :func:`farm.device.adb_devices.parse_devices_l`.
        """
        with (
            self._call("-", ["devices", "-l"], timeout_s, locked=False),
            self._client.make_connection() as conn,
        ):
            conn.send_command("host:devices-l")
            conn.check_okay()
            return "List of devices attached\n" + conn.read_string_block()

    def connect(self, address: str, timeout_s: float | None = None) -> str:
        """``adb connect HOST:PORT`` (adb over TCP); returns the server's message.

        Raises:
            AdbError: the server answered that it could not connect.
        """
        with self._call(address, ["connect", address], timeout_s, locked=False):
            message = self._client.connect(address, timeout=timeout_s)
        if not message.startswith(("connected to", "already connected")):
            raise AdbError(address, ["connect", address], None, message)
        return message

    def shell(
        self,
        serial: str,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        check: bool = False,
    ) -> ShellResult:
        """Run ``argv`` on the phone through shell protocol v2 (stdout, stderr, exit code).

        The arguments are quoted with :func:`shlex.join`, because adbd hands the
        command line to ``sh -c`` (AOSP ``SERVICES.TXT``, ``shell:command``).

        Raises:
            AdbError: with ``check=True``, when the exit code is not 0.
        """
        command = shlex.join(argv)
        with self._call(serial, argv, timeout_s):
            result = self._shell_v2(serial, command)
        if check and result.exit_code != 0:
            raise AdbError(serial, argv, result.exit_code, result.err or result.out)
        return result

    def stream(
        self, serial: str, argv: Sequence[str], *, timeout_s: float | None = None
    ) -> ShellStream:
        """Start ``argv`` on the phone and return its stdout as a :class:`ShellStream`.

        For commands that run until stopped (``logcat`` without ``-d``). The
        deadline covers starting the command; the stream then runs until the
        command exits, the phone leaves or the caller closes it. It takes no
        phone lock, so other calls to the phone go on beside it.
        """
        command = shlex.join(argv)
        with self._call(serial, argv, timeout_s, locked=False):
            conn = self._device(serial).open_transport()
            try:
                conn.send_command(f"shell,v2,raw:{command}")
                conn.check_okay()
            except BaseException:
                conn.close()
                raise
        return ShellStream(conn.conn, serial, argv)

    def _shell_v2(self, serial: str, command: str) -> ShellResult:
        with self._device(serial).open_transport() as conn:
            conn.send_command(f"shell,v2,raw:{command}")
            conn.check_okay()
            stdout, stderr = bytearray(), bytearray()
            while True:
                header = conn.read_exact(5)
                length = int.from_bytes(header[1:5], "little")
                data = conn.read_exact(length) if length else b""
                if header[0] == _ID_STDOUT:
                    stdout += data
                elif header[0] == _ID_STDERR:
                    stderr += data
                elif header[0] == _ID_EXIT:
                    return ShellResult(data[0] if data else 255, bytes(stdout), bytes(stderr))

    def push(
        self, serial: str, local: Path, remote: str, *, timeout_s: float | None = None
    ) -> None:
        """Copy a host file to the phone over the sync protocol (``adb push``).

        As the adb CLI does (AOSP adb ``SYNC.TXT``, ``client/file_sync_client.cpp``):
        ``SEND remote,mode``, ``DATA`` chunks of at most 64 KiB, then ``DONE``
        carrying the local file's mtime, which the phone's copy keeps (adbutils
        sends the current time instead). The mode is 0755, as adbutils sent it.

        Raises:
            AdbError: the phone refused the file (its ``FAIL`` message), or the
                local file cannot be read.
        """
        path = Path(local)
        with self._call(serial, ["push", str(path), remote], timeout_s):
            mtime_s = int(path.stat().st_mtime)
            spec = f"{remote},{stat.S_IFREG | 0o755}".encode()
            with self._device(serial).open_transport() as conn, path.open("rb") as handle:
                conn.send_command("sync:")
                conn.check_okay()
                conn.conn.sendall(b"SEND" + len(spec).to_bytes(4, "little") + spec)
                while chunk := handle.read(_SYNC_DATA_MAX_BYTES):
                    conn.conn.sendall(b"DATA" + len(chunk).to_bytes(4, "little") + chunk)
                conn.conn.sendall(b"DONE" + mtime_s.to_bytes(4, "little"))
                reply = conn.read_exact(8)
                if reply[:4] != b"OKAY":
                    length = int.from_bytes(reply[4:], "little")
                    raise adbutils.AdbError(conn.read_exact(length).decode(errors="replace"))

    def pull(
        self, serial: str, remote: str, local: Path, *, timeout_s: float | None = None
    ) -> int:
        """Copy a phone file to the host (``adb pull``); returns the bytes copied."""
        with self._call(serial, ["pull", remote, str(local)], timeout_s):
            return self._device(serial).sync.pull(remote, Path(local))

    def forward(
        self, serial: str, local: str, remote: str, *, timeout_s: float | None = None
    ) -> int:
        """``adb forward LOCAL REMOTE`` (e.g. ``tcp:0 tcp:5001``); returns the host port.

        ``tcp:0`` lets the adb server bind a free port and answer it (a second
        ``OKAY``, then the port as a length-prefixed string: AOSP adb ``adb.cpp``
        ``handle_forward_request``), so no other process can take the port
        between choosing and binding it.
        """
        with self._call(serial, ["forward", local, remote], timeout_s, locked=False):
            if local == "tcp:0":
                with self._device(serial).open_transport(f"forward:{local};{remote}") as conn:
                    conn.check_okay()
                    return int(conn.read_string_block())
            self._device(serial).forward(local, remote)
        return int(local.split(":", 1)[1])

    def forward_remove(self, serial: str, local: str, *, timeout_s: float | None = None) -> None:
        """``adb forward --remove LOCAL``; a tunnel already gone is fine."""
        with self._call(serial, ["forward", "--remove", local], timeout_s, locked=False):
            self._device(serial).forward_remove(local, raise_non_found=False)

    def reverse(
        self, serial: str, remote: str, local: str, *, timeout_s: float | None = None
    ) -> None:
        """``adb reverse REMOTE LOCAL``: the phone's ``REMOTE`` reaches the host's ``LOCAL``."""
        with self._call(serial, ["reverse", remote, local], timeout_s):
            self._device(serial).reverse(remote, local)

    def reboot(self, serial: str, *, timeout_s: float | None = None) -> None:
        """``adb reboot``: the phone leaves the adb server and comes back after boot."""
        with (
            self._call(serial, ["reboot"], timeout_s),
            self._device(serial).open_transport() as conn,
        ):
            conn.send_command("reboot:")
            conn.check_okay()
            with contextlib.suppress(adbutils.AdbError, OSError):
                conn.read_until_close()


def _map_error(serial: str, argv: Sequence[str], exc: BaseException) -> Exception:
    """Translate an adbutils or socket error into farm's tree (one boundary)."""
    message = str(exc)
    lowered = message.lower()
    if "not found" in lowered and "device" in lowered:
        return DeviceOffline(serial, "absent")
    for state in ("unauthorized", "offline", "authorizing", "connecting"):
        if f"device {state}" in lowered or lowered.endswith(state):
            return DeviceOffline(serial, state)
    if isinstance(exc, (EOFError, ConnectionError)):
        return DeviceOffline(serial, f"link lost ({message or type(exc).__name__})")
    return AdbError(serial, argv, None, message)
