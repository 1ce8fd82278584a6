"""Test helpers for code that mixes blocking TVM calls with asyncio virtual phones.

A virtual phone's network (bridges, relays, forwards) lives on an event loop
that must keep running while a test makes blocking calls (``summary``,
``probe_session``); :class:`LoopThread` runs that loop in a thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], bool], deadline_s: float, interval_s: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``deadline_s`` seconds pass; returns its last value."""
    deadline = time.monotonic() + deadline_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


class LoopThread:
    """An asyncio event loop running in a daemon thread until :meth:`close`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Awaitable[T], timeout_s: float = 60.0) -> T:
        """Run ``coro`` on the loop and return its result, within ``timeout_s``.

        Raises:
            concurrent.futures.TimeoutError: it did not finish in time (it is cancelled).
        """
        future = asyncio.run_coroutine_threadsafe(_as_coroutine(coro), self.loop)
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        """Stop the loop and join its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


@contextmanager
def loop_thread() -> Iterator[LoopThread]:
    """A :class:`LoopThread` closed on exit."""
    runner = LoopThread()
    try:
        yield runner
    finally:
        runner.close()


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
            writer.close()
            return
        self._writers.add(far_writer)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()

        tasks = [asyncio.ensure_future(pump(reader, far_writer)),
                 asyncio.ensure_future(pump(far_reader, writer))]  # fmt: skip
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for w in (writer, far_writer):
            self._writers.discard(w)
            w.close()
