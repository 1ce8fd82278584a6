"""One ADB transport: a TCP connection from the adb server to the phone's adbd.

Implements the device side of AOSP ``adb/protocol.txt`` as adbd does it
(``adb/adb.cpp`` ``handle_packet``, ``handle_new_connection``, ``send_connect``;
``adb/daemon/auth.cpp``):

* CNXN: version ``min(host, A_VERSION)``, max payload ``min(host, 1 MiB)``; the
  reply carries the banner ``device::ro.product.name=..;..;features=..``.
* AUTH, when the phone demands it: AUTH(TOKEN, 20 random bytes); a SIGNATURE
  that an authorized key verifies puts the transport online, any other gets a
  fresh TOKEN; an RSAPUBLICKEY is kept while "the dialog is shown" and the
  transport stays unauthorized until the phone is told to accept it.
* OPEN/OKAY/WRTE/CLSE with any number of concurrent streams; an OPEN for an
  unknown service (or a refused ``tcp:``) gets CLSE(0, remote-id).
* Device-to-host OPEN for ``adb reverse`` (:meth:`Transport.open_to_host`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog

from farm.virtual.adbd.auth import TOKEN_BYTES, AuthorizedKeys
from farm.virtual.adbd.packet import (
    A_AUTH,
    A_CLSE,
    A_CNXN,
    A_OKAY,
    A_OPEN,
    A_STLS,
    A_VERSION,
    A_VERSION_MIN,
    A_VERSION_SKIP_CHECKSUM,
    A_WRTE,
    AUTH_RSAPUBLICKEY,
    AUTH_SIGNATURE,
    AUTH_TOKEN,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_V1_BYTES,
    Packet,
    ProtocolError,
    read_packet,
)
from farm.virtual.adbd.stream import Stream

log = structlog.get_logger(__name__)

ServiceHandler = Callable[[Stream], Awaitable[None]]


class DeviceSide(Protocol):
    """What a transport needs from the phone's adbd."""

    authorized_keys: AuthorizedKeys

    @property
    def auth_required(self) -> bool:
        """Whether new transports must authenticate with an authorized key (AUTH)."""
        ...

    def banner(self) -> str:
        """``device::ro.product.name=..;ro.product.model=..;ro.product.device=..;features=..``."""
        ...

    async def resolve_service(self, name: str, transport: Transport) -> ServiceHandler | None:
        """The handler for an OPEN of ``name``, or None to refuse it."""
        ...

    def transport_online(self, transport: Transport) -> None:
        """Note that ``transport`` has come online (CNXN sent back)."""
        ...

    def transport_closed(self, transport: Transport) -> None:
        """Note that ``transport`` went offline or its connection ended."""
        ...


class Transport:
    """The device end of one adb server connection.

    Args:
        reader, writer: the accepted TCP connection.
        device: the phone's adbd.
        name: adbd's name for the transport, ``host-<fd>`` for TCP
            (``adb/daemon/transport_socket_server.cpp``); ``adb reverse --list`` shows it.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        device: DeviceSide,
        name: str,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._device = device
        self.name = name
        self.version = A_VERSION_MIN
        self.max_payload_bytes = MAX_PAYLOAD_V1_BYTES
        self.online = False
        self.host_banner = ""
        self.pending_public_key: str | None = None
        # How the host got in: "none" (auth off), "signature" (a trusted key signed
        # the token) or "prompt" (its public key was accepted on the phone).
        self.auth_method: str | None = None
        self._token = b""
        self._streams: dict[int, Stream] = {}
        self._next_id = 1
        self._tasks: set[asyncio.Task[None]] = set()
        self._service_tasks: dict[int, asyncio.Task[None]] = {}
        self.reverse_host_specs: set[str] = set()
        self.closed = asyncio.Event()

    # --- sending ------------------------------------------------------------------

    def send(self, packet: Packet) -> None:
        """Queue one packet on the connection (no-op once closed)."""
        if self._writer.is_closing():
            return
        skip = self.version >= A_VERSION_SKIP_CHECKSUM
        self._writer.write(packet.encode(with_checksum=not skip))

    async def drain(self) -> None:
        """Wait for the socket's send buffer to empty below its high-water mark."""
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    # --- lifecycle ----------------------------------------------------------------

    async def run(self) -> None:
        """Serve packets until the connection ends; then close every stream."""
        try:
            while True:
                # adbd never verifies data_check on receipt (transport.cpp only
                # fills it for old peers); the adb server reconnecting to a
                # rebooted phone sends 0 even before the new CNXN negotiates.
                packet = await read_packet(self._reader, MAX_PAYLOAD_BYTES, verify_checksum=False)
                self._handle(packet)
        except (asyncio.IncompleteReadError, ConnectionError, ProtocolError, OSError):
            pass
        finally:
            self._teardown()

    def close(self) -> None:
        """Drop the connection at once, as a pulled cable or a dying adbd does."""
        transport = self._writer.transport
        if transport is not None:
            transport.abort()
        self._teardown()

    def _teardown(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        self.online = False
        for stream in list(self._streams.values()):
            stream.on_peer_close()
        self._streams.clear()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            self._writer.close()
        self._device.transport_closed(self)

    # --- authorization -------------------------------------------------------------

    def go_online(self, auth_method: str = "prompt") -> None:
        """Finish the handshake: send our CNXN (``adbd_auth_verified`` / no auth).

        Args:
            auth_method: ``none``, ``signature`` or ``prompt`` (kept in :attr:`auth_method`).
        """
        if self.online or self.closed.is_set():
            return
        self.online = True
        self.auth_method = auth_method
        self.pending_public_key = None
        banner = self._device.banner().encode()
        self.send(Packet(A_CNXN, A_VERSION, self.max_payload_bytes, banner))
        self._device.transport_online(self)

    def _send_auth_token(self) -> None:
        self._token = os.urandom(TOKEN_BYTES)
        self.send(Packet(A_AUTH, AUTH_TOKEN, 0, self._token))

    # --- receiving -----------------------------------------------------------------

    def _handle(self, packet: Packet) -> None:
        command = packet.command
        if command == A_CNXN:
            self._on_cnxn(packet)
        elif command == A_AUTH:
            self._on_auth(packet)
        elif command == A_STLS:
            # TLS is only for wireless-debugging pairing; a plain `adb connect`
            # never asks for it. Refuse by hanging up.
            raise ProtocolError("STLS is not supported")
        elif not self.online:
            return
        elif command == A_OPEN:
            self._on_open(packet)
        elif command == A_OKAY:
            self._on_okay(packet)
        elif command == A_WRTE:
            stream = self._streams.get(packet.arg1)
            if stream is not None and stream.remote_id == packet.arg0:
                stream.on_write(packet.payload)
        elif command == A_CLSE:
            self._on_clse(packet)

    def _on_okay(self, packet: Packet) -> None:
        """OKAY: the host's id for a stream we opened, or the ack of one WRTE."""
        stream = self._streams.get(packet.arg1)
        if stream is None or packet.arg0 == 0:
            return
        if stream.remote_id == 0:
            stream.remote_id = packet.arg0
            if not stream.opened.done():
                stream.opened.set_result(None)
        elif stream.remote_id == packet.arg0:
            stream.on_okay()

    def _on_clse(self, packet: Packet) -> None:
        stream = self._streams.get(packet.arg1)
        # protocol.txt: arg0 is 0 only for a refused OPEN, but old adb
        # versions sent CLSE(0, id) for normal closes too (adb.cpp).
        if stream is not None and packet.arg0 in (0, stream.remote_id):
            stream.on_peer_close()
            self._cancel_service(stream)

    def _on_cnxn(self, packet: Packet) -> None:
        # A new CNXN resets the connection (adb.cpp handle_new_connection -> handle_offline).
        for stream in list(self._streams.values()):
            stream.on_peer_close()
            self._cancel_service(stream)
        if self.online:
            self.online = False
            self._device.transport_closed(self)
        self.version = min(packet.arg0, A_VERSION)
        self.max_payload_bytes = max(MAX_PAYLOAD_V1_BYTES, min(packet.arg1, MAX_PAYLOAD_BYTES))
        self.host_banner = packet.payload.rstrip(b"\0").decode(errors="replace")
        if self._device.auth_required:
            self._send_auth_token()
        else:
            self.go_online("none")

    def _on_auth(self, packet: Packet) -> None:
        if self.online:
            return
        if packet.arg0 == AUTH_SIGNATURE:
            if self._token and self._device.authorized_keys.verify(self._token, packet.payload):
                self.go_online("signature")
            else:
                self._send_auth_token()
        elif packet.arg0 == AUTH_RSAPUBLICKEY:
            # adbd_auth_confirm_key: the phone shows "Allow USB debugging?" and
            # waits; Adbd.authorize() is the user tapping "Allow".
            self.pending_public_key = packet.payload.rstrip(b"\0").decode(errors="replace")
            if self.pending_public_key in self._device.authorized_keys:
                self.go_online()
        else:
            raise ProtocolError(f"unexpected AUTH type {packet.arg0}")

    def _on_open(self, packet: Packet) -> None:
        if packet.arg0 == 0:
            return
        if packet.arg1 != 0:
            # delayed_ack is not advertised, so the host must send 0 (adb.cpp A_OPEN).
            self.send(Packet(A_CLSE, 0, packet.arg0))
            return
        name = packet.payload.rstrip(b"\0").decode(errors="replace")
        self._spawn(self._serve_open(name, packet.arg0))

    async def _serve_open(self, name: str, remote_id: int) -> None:
        try:
            handler = await self._device.resolve_service(name, self)
        except Exception:  # any failure to start a service is a refusal (CLSE)
            log.exception("adbd_service_refused", transport=self.name, service=name)
            handler = None
        if handler is None or not self.online:
            self.send(Packet(A_CLSE, 0, remote_id))
            return
        stream = self._new_stream(remote_id)
        stream.opened.set_result(None)
        self.send(Packet(A_OKAY, stream.local_id, remote_id))
        task = asyncio.current_task()
        if task is not None:
            self._service_tasks[stream.local_id] = task
        try:
            await handler(stream)
            await stream.aclose()
        except Exception:  # a bug in a service must not take the transport down
            log.exception("adbd_service_failed", transport=self.name, service=name)
        finally:
            self._service_tasks.pop(stream.local_id, None)
            stream.close()

    # --- streams --------------------------------------------------------------------

    def _new_stream(self, remote_id: int) -> Stream:
        local_id = self._next_id
        self._next_id += 1
        stream = Stream(self, local_id, remote_id)
        self._streams[local_id] = stream
        return stream

    def forget(self, stream: Stream) -> None:
        """Drop a closed stream from the table (called by :class:`Stream`)."""
        if self._streams.get(stream.local_id) is stream:
            del self._streams[stream.local_id]

    def _cancel_service(self, stream: Stream) -> None:
        task = self._service_tasks.get(stream.local_id)
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def stream_count(self) -> int:
        """Streams currently open on this transport."""
        return len(self._streams)

    async def open_to_host(self, destination: str) -> Stream:
        """Open a stream from the phone to the host (``adb reverse``): OPEN(id, 0, dest).

        Only destinations set up with ``reverse:forward`` on this transport are
        opened: the adb server aborts on any other (``adb.cpp`` A_OPEN,
        ``IsReverseConfigured``).

        Raises:
            ConnectionRefusedError: the transport is down, the destination was not
                configured, or the host answered CLSE.
        """
        if not self.online or destination not in self.reverse_host_specs:
            raise ConnectionRefusedError(f"no reverse tunnel to {destination} on {self.name}")
        stream = self._new_stream(0)
        self.send(Packet(A_OPEN, stream.local_id, 0, destination.encode() + b"\0"))
        await stream.opened
        return stream

