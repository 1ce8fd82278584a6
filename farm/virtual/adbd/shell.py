r"""adbd's ``shell:``, ``shell,v2,...:`` and ``exec:`` services.

Behaviour follows AOSP ``adb/daemon/services.cpp`` ``ShellService`` and
``adb/daemon/shell_service.cpp``:

=================  ==========  ============================  ==========
service            terminal    output                        exit code
=================  ==========  ============================  ==========
``shell:cmd``      raw         stdout and stderr merged      none
``shell:``         pty         merged, ``\n`` -> ``\r\n``    none
``shell,v2,..:``   raw or pty  shell-protocol packets        kIdExit
``exec:cmd``       raw         stdout and stderr merged      none
=================  ==========  ============================  ==========

An empty command means pty unless ``raw`` is given. ``exec:`` merges stderr
into stdout like ``shell:`` does: ``StartSubprocess(..., kRaw, kNone)`` dup2()s
the child's stderr onto the same socket (``shell_service.cpp`` ``ForkAndExec``).

Shell protocol packets (``adb/shell_protocol.h``): one id byte, a u32 LE
length, then the data. Ids: stdin 0, stdout 1, stderr 2, exit 3,
close-stdin 4, window-size-change 5.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import struct
from dataclasses import dataclass

from farm.virtual.adbd.stream import Stream
from farm.virtual.contracts import Userland

ID_STDIN = 0
ID_STDOUT = 1
ID_STDERR = 2
ID_EXIT = 3
ID_CLOSE_STDIN = 4
ID_WINDOW_SIZE_CHANGE = 5

_PACKET_HEADER = struct.Struct("<BI")


@dataclass(frozen=True)
class ShellRequest:
    """A parsed ``shell[,arg,...]:command`` service name.

    Attributes:
        command: the command line; empty for an interactive shell.
        pty: run on a pseudo-terminal (default for empty commands).
        protocol_v2: wrap I/O in shell-protocol packets (``v2`` argument).
        term: the ``TERM=`` value, ``dumb`` by default.
    """

    command: str
    pty: bool
    protocol_v2: bool
    term: str = "dumb"


def parse_shell_service(args: str) -> ShellRequest | None:
    """Parse what follows ``shell`` in the service name, e.g. ``,v2,raw:ls``.

    Returns None when there is no ``:`` (adbd refuses such an OPEN).
    """
    options, sep, command = args.partition(":")
    if not sep:
        return None
    pty = command == ""
    protocol_v2 = False
    term = "dumb"
    for arg in options.split(","):
        if arg == "raw":
            pty = False
        elif arg == "pty":
            pty = True
        elif arg == "v2":
            protocol_v2 = True
        elif arg.startswith("TERM="):
            term = arg[len("TERM=") :]
    return ShellRequest(command=command, pty=pty, protocol_v2=protocol_v2, term=term)


def encode_packet(packet_id: int, data: bytes) -> bytes:
    """One shell-protocol packet."""
    return _PACKET_HEADER.pack(packet_id, len(data)) + data


class _RawShellIO:
    """ShellIO for ``shell:`` v1 and ``exec:``: one byte stream each way."""

    def __init__(self, stream: Stream, *, pty: bool) -> None:
        self._stream = stream
        self._pty = pty

    async def read_stdin(self) -> bytes:
        return await self._stream.read()

    def write_stdout(self, data: bytes) -> None:
        if self._pty:
            # The tty line discipline's ONLCR turns \n into \r\n.
            data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        self._stream.write(data)

    def write_stderr(self, data: bytes) -> None:
        self.write_stdout(data)

    async def drain(self) -> None:
        await self._stream.drain()


class _ShellV2IO:
    """ShellIO for ``shell,v2``: stdout and stderr apart, stdin in packets."""

    def __init__(self, stream: Stream, *, pty: bool) -> None:
        self._stream = stream
        self._pty = pty
        # adbd reads at most kBufferSize - header from the child per packet, and
        # the client's buffer is MAX_PAYLOAD: keep packets within one WRTE.
        self._max_data_bytes = max(1, stream.transport.max_payload_bytes - _PACKET_HEADER.size)
        self._stdin: collections.deque[bytes] = collections.deque()
        self._stdin_ready = asyncio.Event()
        self._stdin_closed = False
        self._reader = asyncio.ensure_future(self._read_packets())

    async def _read_packets(self) -> None:
        try:
            while True:
                header = await self._stream.readexactly(_PACKET_HEADER.size)
                packet_id, length = _PACKET_HEADER.unpack(header)
                data = await self._stream.readexactly(length) if length else b""
                if packet_id == ID_STDIN and data:
                    self._stdin.append(data)
                elif packet_id == ID_CLOSE_STDIN:
                    break
                # Window-size changes only matter to a real tty; ignored.
                self._stdin_ready.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._stdin_closed = True
            self._stdin_ready.set()

    async def read_stdin(self) -> bytes:
        while not self._stdin:
            if self._stdin_closed:
                return b""
            self._stdin_ready.clear()
            await self._stdin_ready.wait()
        return self._stdin.popleft()

    def _write(self, packet_id: int, data: bytes) -> None:
        if self._pty:
            data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        step = self._max_data_bytes
        for start in range(0, len(data), step):
            self._stream.write(encode_packet(packet_id, data[start : start + step]))

    def write_stdout(self, data: bytes) -> None:
        self._write(ID_STDOUT, data)

    def write_stderr(self, data: bytes) -> None:
        # On a pty stdout and stderr are the same terminal.
        self._write(ID_STDOUT if self._pty else ID_STDERR, data)

    async def drain(self) -> None:
        await self._stream.drain()

    def exit(self, status: int) -> None:
        self._stream.write(encode_packet(ID_EXIT, bytes([status & 0xFF])))

    async def stop(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


async def serve_shell(userland: Userland, request: ShellRequest, stream: Stream) -> None:
    """Run one shell service on ``stream`` until the command ends or the host closes."""
    if request.protocol_v2:
        io = _ShellV2IO(stream, pty=request.pty)
        try:
            status = await userland.shell(request.command, io)
            io.exit(status)
        except ConnectionError:
            pass
        finally:
            await io.stop()
        return
    with contextlib.suppress(ConnectionError):
        await userland.shell(request.command, _RawShellIO(stream, pty=request.pty))


async def serve_exec(userland: Userland, command: str, stream: Stream) -> None:
    """``exec:command``: raw, no protocol, stderr merged (see module docstring)."""
    with contextlib.suppress(ConnectionError):
        await userland.shell(command, _RawShellIO(stream, pty=False))
