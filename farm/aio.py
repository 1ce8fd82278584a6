"""An asyncio event loop in a thread, for blocking code that owns async servers.

farmd is threaded (APScheduler jobs, adb calls); the per-phone tracker relays
are asyncio servers. :class:`LoopThread` runs their loop beside the threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class StreamReaderLike(Protocol):
    """The reading half of a stream pair (``asyncio.StreamReader`` fits)."""

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (all until EOF when -1); ``b""`` at EOF."""
        ...


class StreamWriterLike(Protocol):
    """The writing half of a stream pair (``asyncio.StreamWriter`` fits)."""

    def write(self, data: bytes) -> None:
        """Queue ``data`` for sending."""
        ...

    async def drain(self) -> None:
        """Wait until the queue is below the flow-control limit."""
        ...

    def close(self) -> None:
        """Close the stream; queued data is still sent."""
        ...


CHUNK_BYTES = 65536
"""Most bytes :func:`pump` moves per read."""


class LoopThread:
    """An asyncio event loop running in a daemon thread until :meth:`close`."""

    def __init__(self, name: str = "farm-aio") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
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

    def call(self, fn: Callable[[], T], timeout_s: float = 60.0) -> T:
        """Run the plain function ``fn()`` on the loop's thread and return its result.

        For objects owned by the loop (servers, transports) that are not thread-safe.

        Raises:
            concurrent.futures.TimeoutError: the loop did not get to it in time.
        """

        async def call() -> T:
            return fn()

        return self.run(call(), timeout_s)

    def close(self) -> None:
        """Stop the loop and join its thread."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def pump(reader: StreamReaderLike, writer: StreamWriterLike) -> None:
    """Copy bytes from ``reader`` to ``writer`` until ``reader`` ends (reads ``b""``).

    Chunks of at most :data:`CHUNK_BYTES`; each is drained before the next read.
    Neither side is closed here.

    Raises:
        OSError: either side failed (e.g. ``ConnectionResetError``).
    """
    while data := await reader.read(CHUNK_BYTES):
        writer.write(data)
        await writer.drain()


async def splice(
    reader_a: StreamReaderLike,
    writer_a: StreamWriterLike,
    reader_b: StreamReaderLike,
    writer_b: StreamWriterLike,
) -> None:
    """Copy a->b and b->a until either side ends or fails, then return.

    Nothing is closed here (the caller owns both connections), and half-close is
    not kept: neither the tracker protocol nor TVM RPC uses it, and an adb
    stream has no ``write_eof``.
    """
    await until_first_done(pump(reader_a, writer_b), pump(reader_b, writer_a))


async def until_first_done(*coros: Awaitable[object]) -> None:
    """Run ``coros`` until one of them ends, then cancel and reap the others.

    The shape of every two-way byte pump (adb stream <-> socket, bridge <->
    bridge): whichever side closes first ends the pair. Errors of the pumps
    (a reset connection) end them quietly, as a closed side would.
    """
    tasks = [asyncio.ensure_future(coro) for coro in coros]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, OSError, ConnectionError):
                await task
