"""A long-running shell command's stdout, line by line (``logcat`` without ``-d``).

:meth:`farm.adb.Adb.stream` starts the command over shell protocol v2 (the
start has a deadline like every adb call) and hands the open socket to a
:class:`ShellStream`. The stream holds no phone lock, since it may run for hours
while other calls to the phone go on. It ends when the command exits, when
the phone's link drops (the adb server closes the socket: unplug, reboot), or
when :meth:`ShellStream.close` is called from any thread.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator, Sequence

__all__ = ["ShellStream"]

# Shell v2 packets (AOSP adb shell_protocol.h): id byte, little-endian u32 length, data.
_ID_STDOUT, _ID_EXIT = 1, 3
_HEADER_BYTES = 5
_RECV_BYTES = 64 * 1024
#: How often a blocked read looks at the close flag, in seconds (a close also
#: shuts the socket down, which ends the read at once; this is the backstop).
POLL_S = 1.0


class ShellStream:
    """stdout lines of one running shell command on a phone.

    Attributes:
        serial: the phone.
        argv: the command.
        exit_code: the command's exit status once it exited (None: it did not,
            the link dropped, or the stream was closed).
    """

    def __init__(self, sock: socket.socket, serial: str, argv: Sequence[str]) -> None:
        self.serial = serial
        self.argv = list(argv)
        self.exit_code: int | None = None
        self._sock = sock
        self._closed = threading.Event()
        sock.settimeout(POLL_S)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed.is_set()

    def lines(self) -> Iterator[str]:
        r"""Yield each stdout line (decoded as UTF-8, invalid bytes replaced, no ``\n``).

        Returns when the command exits, the link drops or the stream is
        closed; stderr is dropped. A last line without ``\n`` is yielded too.
        """
        out = bytearray()
        try:
            for kind, payload in self._packets():
                if kind == _ID_EXIT:
                    self.exit_code = payload[0] if payload else 255
                    break
                if kind == _ID_STDOUT:
                    out += payload
                    *complete, rest = out.split(b"\n")
                    out = bytearray(rest)
                    for line in complete:
                        yield line.decode("utf-8", errors="replace")
            if out:
                yield out.decode("utf-8", errors="replace")
        finally:
            self.close()

    def _packets(self) -> Iterator[tuple[int, bytes]]:
        """Shell v2 packets until the socket ends or the stream is closed."""
        data = bytearray()
        while not self._closed.is_set():
            try:
                chunk = self._sock.recv(_RECV_BYTES)
            except TimeoutError:
                continue
            except OSError:
                return  # closed under us, or the link reset
            if not chunk:
                return
            data += chunk
            while len(data) >= _HEADER_BYTES:
                length = int.from_bytes(data[1:_HEADER_BYTES], "little")
                if len(data) < _HEADER_BYTES + length:
                    break
                yield data[0], bytes(data[_HEADER_BYTES:_HEADER_BYTES + length])
                del data[:_HEADER_BYTES + length]

    def close(self) -> None:
        """End the stream (from any thread): the phone's command sees its reader go."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._sock.close()
