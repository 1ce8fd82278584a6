"""A shell session's streams: stdin from the adb stream, output to it or to a redirected file."""

from __future__ import annotations

import os

from farm.virtual.contracts import ShellIO

__all__ = ["FileSink", "IoStdin", "StreamSink"]


class IoStdin:
    """Stdin read from the adb stream."""

    def __init__(self, io: ShellIO) -> None:
        self._io = io
        self._eof = False

    async def read(self) -> bytes:
        """Next chunk from the adb stream; ``b""`` from its end on."""
        if self._eof:
            return b""
        data = await self._io.read_stdin()
        if not data:
            self._eof = True
        return data


class StreamSink:
    """Output written straight to a stream's ``write`` (an empty write is dropped)."""

    def __init__(self, write: object) -> None:
        self._write = write

    def write(self, data: bytes) -> None:
        """Write ``data`` unless it is empty."""
        if data:
            self._write(data)  # type: ignore[operator]


class FileSink:
    """Collects output, then writes (or appends) it to a host file."""

    def __init__(self, path: os.PathLike[str], append: bool) -> None:
        self.path = path
        with open(path, "ab" if append else "wb"):
            pass

    def write(self, data: bytes) -> None:
        """Append ``data`` to the file."""
        with open(self.path, "ab") as f:
            f.write(data)
