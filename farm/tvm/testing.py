"""Test helpers for code that mixes blocking TVM calls with asyncio virtual phones.

A virtual phone's network (bridges, relays, forwards) lives on an event loop
that must keep running while a test makes blocking calls (``summary``,
``probe_session``); :class:`LoopThread` runs that loop in a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from farm.aio import LoopThread, splice

__all__ = ["Forward", "LoopThread"]


class Forward:
    """What ``adb forward tcp:F tcp:DEVICE_PORT`` does on the host, for tests without adb.

    A loopback listener whose connections are opened with ``connect`` (e.g. a
    phone's ``Net.connect_device_port``) and spliced.
    """

    def __init__(
        self,
        connect: Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]],
    ) -> None:
        self._connect = connect
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> int:
        """Listen on a free loopback port; returns it."""
        self._server = await asyncio.start_server(self._on_conn, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        """Stop listening and cut open connections."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            far_reader, far_writer = await self._connect()
        except OSError:
            self._writers.discard(writer)
            writer.close()
            return
        self._writers.add(far_writer)

        try:
            await splice(reader, writer, far_reader, far_writer)
        finally:
            for w in (writer, far_writer):
                self._writers.discard(w)
                w.close()
