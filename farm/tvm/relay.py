"""Per-phone tracker relay that lets several usb-only phones serve tracker clients.

The problem. A phone that reaches the host only over USB talks to the tracker
through ``adb reverse tcp:9190 tcp:<host port>``, and the host reaches the
phone's RPC port only through ``adb forward tcp:<F> tcp:<P>``. The stock app
registers the way apache/tvm ``ConnectTrackerServerProcessor.java`` does:
``UPDATE_INFO {"addr": [null, "P"]}`` and ``PUT [key, [P, matchkey], null]``
(``python/tvm/rpc/server.py`` sends the same two messages), where ``P`` is the
port the app bound: the first free one from 5001, so 5002 when another app
holds 5001. The tracker records *the address it sees the connection come
from* (the adb server's loopback) and *port P*, which on the host is nobody
(or one arbitrary phone).

The mechanism. Each usb-only phone gets its own :class:`Relay`: a loopback
listener that the phone's reverse tunnel points at
(``adb reverse tcp:9190 tcp:<relay.port>``). The relay connects to the real
tracker for each phone connection, passes the magic handshake through, and
then parses the phone's messages (length-prefixed JSON, see
:mod:`farm.tvm.protocol`). The first message that names the app's port
(:func:`announced_port`) makes the relay ask for a forward to *that* port
(its ``forward`` callback, ``adb forward tcp:0 tcp:P``, kept per port for the
relay's life); then it rewrites the two messages that name an address:

- ``PUT``: the port becomes the forward port and the custom address (4th
  element) becomes the forward host, so tickets say ``host:F``;
- ``UPDATE_INFO``: ``addr`` becomes ``[host, F]``, so the tracker's summary
  lists the phone at its forwarded endpoint.

Everything else (``GET_PENDING_MATCHKEYS``, ``PING``) passes unchanged, and the
tracker's replies are copied byte for byte. A client asking the tracker for
the key then gets ``host:F``, connects to the phone's ``adb forward`` endpoint,
and the adb transport carries the session to the app's port P::

    phone app --reverse--> Relay(phone A) --rewrite--> tracker
    client --REQUEST--> tracker: "127.0.0.1:F_A, matchkey"
    client --> 127.0.0.1:F_A --adb forward--> phone A tcp:P_A

Learning the port from the registration, rather than assuming 5001, is what
makes a phone whose app bound 5002 reachable at all. The relay holds no state
beyond its connections, its forwards and the app's newest registration
(:attr:`Relay.offer`, which farm's pool key reads: :mod:`farm.fleet.pool`), so
it survives tracker restarts: the app reconnects through it like through any
tracker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Self

import structlog

from farm.aio import pump, until_first_done
from farm.errors import FarmError
from farm.tvm.protocol import (
    RPC_TRACKER_MAGIC,
    FrameError,
    TrackerCode,
    encode_frame,
    pack_int32,
    read_frame,
)

log = structlog.get_logger(__name__)


ForwardOpener = Callable[[int], Awaitable[int]]
"""``forward(device_port) -> host_port``: makes ``adb forward tcp:0 tcp:<device_port>``.

May raise ``OSError`` or a :class:`~farm.errors.FarmError`; the relay then
drops the phone's connection (the app retries, as with a tracker that is down).
"""


@dataclass(frozen=True)
class Offer:
    """The app's newest registration, as the tracker hands it out to clients.

    Attributes:
        key: the tracker key the app registered under (``<tracker.key>-<serial>``).
        host: where clients connect (the relay's ``advertise_host``).
        port: the host port forwarded to the app's RPC port.
        matchkey: the match key the app accepts now (``key:<random>``); a
            client must present it (``client:<matchkey>``) or is refused.
    """

    key: str
    host: str
    port: int
    matchkey: str


def _port(value: Any) -> int | None:
    """A port as the app sends it (int, or a string in the stock app), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and 0 < value < 65536 else None


def announced_port(message: Any) -> int | None:
    """The device port a phone's registration names, or None for other messages.

    ``PUT [key, [port, matchkey], addr]`` and ``UPDATE_INFO {"addr": [host, port]}``
    (apache/tvm ``python/tvm/rpc/server.py``; the stock app sends the port of
    ``UPDATE_INFO`` as a string).
    """
    if not isinstance(message, list) or not message:
        return None
    code = message[0]
    if code == TrackerCode.PUT and len(message) >= 3 and isinstance(message[2], list):
        return _port(message[2][0]) if len(message[2]) == 2 else None
    if code == TrackerCode.UPDATE_INFO and len(message) == 2 and isinstance(message[1], dict):
        addr = message[1].get("addr")
        return _port(addr[1]) if isinstance(addr, list) and len(addr) == 2 else None
    return None


def rewrite_message(message: Any, advertise: tuple[str, int]) -> Any:
    """The message a phone sent, with its address replaced by ``advertise``.

    Args:
        message: one decoded tracker message, e.g. ``[3, "android", [5001, "android:0.1"], None]``.
        advertise: ``(host, port)`` clients must use to reach this phone.

    Returns:
        The rewritten message (a new object) when it is a registration that
        :func:`announced_port` reads; others are returned unchanged.
    """
    if announced_port(message) is None:
        return message
    host, port = advertise
    code = message[0]
    if code == TrackerCode.PUT:
        return [code, message[1], [port, message[2][1]], host, *message[4:]]
    if code == TrackerCode.UPDATE_INFO and len(message) == 2 and isinstance(message[1], dict):
        return [code, {**message[1], "addr": [host, port]}]
    return message


class Relay:
    """A tracker relay for one phone.

    Args:
        tracker: ``(host, port)`` of the real tracker.
        forward: makes the host's forward to a device port and returns the
            host port (see :data:`ForwardOpener`); called once per device port.
        advertise_host: the host address of those forwards, where clients
            must connect to reach the phone's RPC port.

    Attributes:
        port: the loopback port the phone's reverse tunnel must point at.
        forwards: ``{device port: host port}`` of the forwards made so far.
    """

    def __init__(
        self, tracker: tuple[str, int], forward: ForwardOpener, advertise_host: str = "127.0.0.1"
    ) -> None:
        self.tracker = tracker
        self.advertise_host = advertise_host
        self._forward = forward
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._forward_lock = asyncio.Lock()
        self._closed = False
        self.forwards: dict[int, int] = {}
        self.port = 0
        # The newest PUT of a live app connection, and which connection made it.
        self.offer: Offer | None = None
        self._offer_by: object = None

    async def start(self) -> int:
        """Listen on a free loopback port (where the phone's reverse tunnel lands); returns it."""
        self._server = await asyncio.start_server(self._on_phone, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        """Stop listening, cut every relayed connection and wait for a forward being made.

        After it returns :attr:`forwards` is final: the caller removes those
        forwards, and no new one is made.
        """
        self._closed = True
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._server = None
        async with self._forward_lock:
            pass

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _on_phone(
        self, phone_reader: asyncio.StreamReader, phone_writer: asyncio.StreamWriter
    ) -> None:
        self._writers.add(phone_writer)
        tracker_writer: asyncio.StreamWriter | None = None
        connection = object()  # which app connection an offer came from
        try:
            tracker_reader, tracker_writer = await asyncio.open_connection(*self.tracker)
            self._writers.add(tracker_writer)
            await until_first_done(
                pump(tracker_reader, phone_writer),
                self._rewrite_stream(phone_reader, tracker_writer, connection),
            )
        except OSError:
            pass  # tracker down: closing makes the app retry, as with no relay
        finally:
            if self._offer_by is connection:  # its registration died with it
                self.offer, self._offer_by = None, None
            for writer in (phone_writer, tracker_writer):
                if writer is not None:
                    self._writers.discard(writer)
                    writer.close()

    async def _rewrite_stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        connection: object = None,
    ) -> None:
        """Copy the phone's side to the tracker, rewriting its messages, until it ends.

        A phone that closes mid-frame (or before its magic) or sends a bad frame
        just ends the connection.
        """
        try:
            magic = await reader.readexactly(4)
            writer.write(magic)
            if magic != pack_int32(RPC_TRACKER_MAGIC):
                await pump(reader, writer)  # not tracker protocol: pass it through untouched
                return
            while True:
                message = await read_frame(reader)
                device_port = announced_port(message)
                if device_port is not None:
                    try:
                        host_port = await self.forward_for(device_port)
                    except (OSError, FarmError) as exc:
                        log.warning("relay_forward_failed", device_port=device_port,
                                    reason=str(exc))
                        return  # the app sees the tracker go away and registers again
                    message = rewrite_message(message, (self.advertise_host, host_port))
                writer.write(encode_frame(message))
                await writer.drain()
                if device_port is not None and message[0] == TrackerCode.PUT:
                    self.offer = Offer(str(message[1]), self.advertise_host, message[2][0],
                                       str(message[2][1]))
                    self._offer_by = connection
        except (asyncio.IncompleteReadError, FrameError):
            return

    async def forward_for(self, device_port: int) -> int:
        """The host port forwarded to ``device_port``, made on first use.

        Raises:
            ConnectionAbortedError: the relay is closed.
            Whatever the ``forward`` callback raises (nothing is cached then).
        """
        async with self._forward_lock:
            if self._closed:
                raise ConnectionAbortedError("relay closed")
            host_port = self.forwards.get(device_port)
            if host_port is None:
                host_port = await self._forward(device_port)
                self.forwards[device_port] = host_port
            return host_port
