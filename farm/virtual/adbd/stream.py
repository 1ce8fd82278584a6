"""One ADB stream: a byte pipe between a host socket and a device service.

Flow control follows AOSP ``adb/protocol.txt`` without ``delayed_ack``: each
WRTE must be answered by an OKAY before the sender's next WRTE on that stream.
Inbound, the OKAY is sent when the service consumes the chunk, so a slow
service holds the host back as a full socket buffer does in adbd. Outbound,
:meth:`Stream.write` only buffers; a flusher sends WRTEs of at most the
negotiated max payload and waits for each OKAY.

A stream is also the ``(reader, writer)`` pair that
:data:`farm.virtual.contracts.HostOpener` returns for ``adb reverse``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Protocol

from farm.virtual.adbd.packet import A_CLSE, A_OKAY, A_WRTE, Packet


class StreamTransport(Protocol):
    """What a stream needs of its transport (:class:`farm.virtual.adbd.transport.Transport`).

    A protocol, so that the transport, which owns its streams, and the stream do not
    import each other.
    """

    max_payload_bytes: int

    def send(self, packet: Packet) -> None:
        """Queue ``packet`` for the host."""

    async def drain(self) -> None:
        """Wait until the queued packets are written to the socket."""

    def forget(self, stream: Stream) -> None:
        """Drop ``stream`` from the transport's table of open streams."""


class Stream:
    """A stream with local id ``local_id`` (ours) and ``remote_id`` (the host's).

    ``remote_id`` is 0 while a device-initiated OPEN waits for the host's answer.
    """

    def __init__(self, transport: StreamTransport, local_id: int, remote_id: int) -> None:
        self.transport = transport
        self.local_id = local_id
        self.remote_id = remote_id
        self._inbound: collections.deque[bytes] = collections.deque()
        self._inbound_ready = asyncio.Event()
        self._pending: bytes = b""  # rest of a chunk a read(n) did not take
        self._outbound = bytearray()
        self._acked = asyncio.Event()
        self._acked.set()
        self._flushed = asyncio.Event()
        self._flushed.set()
        self._flusher: asyncio.Task[None] | None = None
        self.peer_closed = False  # the host sent CLSE, or the transport ended
        self.closed = False  # we sent CLSE (or never will)
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # --- reading ------------------------------------------------------------------

    async def read(self, n: int = -1) -> bytes:
        """Next bytes from the host, at most ``n`` if ``n > 0``; ``b""`` at end of stream."""
        if not self._pending:
            while not self._inbound:
                if self.peer_closed:
                    return b""
                self._inbound_ready.clear()
                await self._inbound_ready.wait()
            self._pending = self._inbound.popleft()
            if not self.peer_closed:
                # The host may send its next WRTE now (protocol.txt: READY after WRITE).
                self.transport.send(Packet(A_OKAY, self.local_id, self.remote_id))
        if n is None or n < 0 or n >= len(self._pending):
            data, self._pending = self._pending, b""
        else:
            data, self._pending = self._pending[:n], self._pending[n:]
        return data

    async def readexactly(self, n: int) -> bytes:
        """Exactly ``n`` bytes.

        Raises:
            asyncio.IncompleteReadError: the stream ended first.
        """
        parts: list[bytes] = []
        got = 0
        while got < n:
            chunk = await self.read(n - got)
            if not chunk:
                raise asyncio.IncompleteReadError(b"".join(parts), n)
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    # --- writing ------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue ``data`` for the host; dropped once either side closed."""
        if self.closed or self.peer_closed or not data:
            return
        self._outbound += data
        self._flushed.clear()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())

    async def drain(self) -> None:
        """Wait until every queued byte was acknowledged by the host.

        Raises:
            ConnectionResetError: the host closed the stream (or the transport ended).
        """
        if self.peer_closed:
            raise ConnectionResetError("adb stream closed by the host")
        await self._flushed.wait()
        if self.peer_closed:
            raise ConnectionResetError("adb stream closed by the host")

    async def _flush(self) -> None:
        """Send the queue one WRTE at a time, each once the host acknowledged the last.

        It ends when the last WRTE is acknowledged and nothing is queued:
        output queued while it waited for that OKAY goes out too (it used to
        stay queued until the next write, so a ``logcat`` follower's second
        line of a burst arrived only with the next burst).
        """
        max_bytes = self.transport.max_payload_bytes
        while not (self.peer_closed or self.closed):
            await self._acked.wait()
            if self.peer_closed or not self._outbound:
                break
            chunk = bytes(self._outbound[:max_bytes])
            del self._outbound[:max_bytes]
            self._acked.clear()
            self.transport.send(Packet(A_WRTE, self.local_id, self.remote_id, chunk))
            await self.transport.drain()
        self._flushed.set()

    def close(self) -> None:
        """Close without waiting: CLSE now; unsent output is dropped."""
        if not self.closed:
            self.closed = True
            if not self.peer_closed and self.remote_id:
                self.transport.send(Packet(A_CLSE, self.local_id, self.remote_id))
            self._end()

    async def aclose(self) -> None:
        """Flush queued output (until the host acknowledged it), then close."""
        with contextlib.suppress(ConnectionResetError):
            await self.drain()
        self.close()

    async def wait_closed(self) -> None:
        """For the ``StreamWriterLike`` shape; closing is immediate."""

    # --- called by the transport --------------------------------------------------

    def on_write(self, payload: bytes) -> None:
        """The host sent WRTE; the OKAY goes out when a reader takes it."""
        if self.peer_closed or self.closed:
            return
        self._inbound.append(payload)
        self._inbound_ready.set()

    def on_okay(self) -> None:
        """The host acknowledged our last WRTE."""
        self._acked.set()

    def on_peer_close(self) -> None:
        """The host sent CLSE, or the transport ended."""
        self.peer_closed = True
        self.closed = True
        if not self.opened.done():
            self.opened.set_exception(ConnectionRefusedError("adb server refused the stream"))
        self._end()

    def _end(self) -> None:
        self._inbound_ready.set()
        self._acked.set()
        self._outbound.clear()
        self._flushed.set()
        self.transport.forget(self)
