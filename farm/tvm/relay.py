"""Per-phone tracker relay that lets several usb-only phones serve tracker clients.

The problem. A phone that reaches the host only over USB talks to the tracker
through ``adb reverse tcp:9190 tcp:<host port>``, and the host reaches the
phone's RPC port only through ``adb forward tcp:<F> tcp:5001``. The stock app
registers the way apache/tvm ``ConnectTrackerServerProcessor.java`` does:
``UPDATE_INFO {"addr": [null, "5001"]}`` and ``PUT [key, [5001, matchkey],
null]``, so the tracker records *the address it sees the connection come
from* (the adb server's loopback) and *port 5001*. Every usb-only phone binds
5001 on its own device, so every registration says ``127.0.0.1:5001``, which
on the host is nobody (or one arbitrary phone).

The mechanism. Each usb-only phone gets its own :class:`Relay`: a loopback
listener that the phone's reverse tunnel points at
(``adb reverse tcp:9190 tcp:<relay.port>``). The relay connects to the real
tracker for each phone connection, passes the magic handshake through, and
then parses the phone's messages (length-prefixed JSON, see
:mod:`farm.tvm.protocol`) and rewrites the two that name an address:

- ``PUT``: the port becomes the forward port and the custom address (4th
  element) becomes the forward host, so tickets say ``host:F``;
- ``UPDATE_INFO``: ``addr`` becomes ``[host, F]``, so the tracker's summary
  lists the phone at its forwarded endpoint.

Everything else (``GET_PENDING_MATCHKEYS``, ``PING``) passes unchanged, and the
tracker's replies are copied byte for byte. A client asking the tracker for
the key then gets ``host:F``, connects to the phone's ``adb forward`` endpoint,
and the adb transport carries the session to the app's port 5001::

    phone app --reverse--> Relay(phone A) --rewrite--> tracker
    client --REQUEST--> tracker: "127.0.0.1:F_A, matchkey"
    client --> 127.0.0.1:F_A --adb forward--> phone A tcp:5001

The relay holds no state beyond its connections, so it survives tracker
restarts: the app reconnects through it like through any tracker.
"""

from __future__ import annotations

import asyncio
from typing import Any

from farm.aio import pump, until_first_done
from farm.tvm.protocol import (
    RPC_TRACKER_MAGIC,
    FrameError,
    TrackerCode,
    encode_frame,
    pack_int32,
    read_frame,
)


def rewrite_message(message: Any, advertise: tuple[str, int]) -> Any:
    """The message a phone sent, with its address replaced by ``advertise``.

    Args:
        message: one decoded tracker message, e.g. ``[3, "android", [5001, "android:0.1"], None]``.
        advertise: ``(host, port)`` clients must use to reach this phone.

    Returns:
        The rewritten message (a new object); others are returned unchanged.
    """
    if not isinstance(message, list) or not message:
        return message
    host, port = advertise
    code = message[0]
    if code == TrackerCode.PUT and len(message) >= 3 and isinstance(message[2], list):
        _, matchkey = message[2]
        return [code, message[1], [port, matchkey], host, *message[4:]]
    if code == TrackerCode.UPDATE_INFO and len(message) == 2 and isinstance(message[1], dict):
        return [code, {**message[1], "addr": [host, port]}]
    return message


class Relay:
    """A tracker relay for one phone.

    Args:
        tracker: ``(host, port)`` of the real tracker.
        advertise: ``(host, port)`` of the phone's ``adb forward`` endpoint on
            the host, i.e. where clients must connect to reach its RPC port.
    """

    def __init__(self, tracker: tuple[str, int], advertise: tuple[str, int]) -> None:
        self.tracker = tracker
        self.advertise = advertise
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> int:
        """Listen on a free loopback port (where the phone's reverse tunnel lands); returns it."""
        self._server = await asyncio.start_server(self._on_phone, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def close(self) -> None:
        """Stop listening and cut every relayed connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        self._server = None

    async def __aenter__(self) -> Relay:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _on_phone(
        self, phone_reader: asyncio.StreamReader, phone_writer: asyncio.StreamWriter
    ) -> None:
        self._writers.add(phone_writer)
        tracker_writer: asyncio.StreamWriter | None = None
        try:
            tracker_reader, tracker_writer = await asyncio.open_connection(*self.tracker)
            self._writers.add(tracker_writer)
            await until_first_done(
                pump(tracker_reader, phone_writer),
                self._rewrite_stream(phone_reader, tracker_writer),
            )
        except OSError:
            pass  # tracker down: closing makes the app retry, as with no relay
        finally:
            for writer in (phone_writer, tracker_writer):
                if writer is not None:
                    self._writers.discard(writer)
                    writer.close()

    async def _rewrite_stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
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
                writer.write(encode_frame(rewrite_message(message, self.advertise)))
                await writer.drain()
        except (asyncio.IncompleteReadError, FrameError):
            return
