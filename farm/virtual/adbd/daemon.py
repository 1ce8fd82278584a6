"""adbd for one virtual phone: the TCP listener, its transports and their faults.

The adb server reaches the phone with ``adb connect 127.0.0.1:PORT``. When a
transport it connected to drops, the server marks the device ``offline`` and
reconnects on its own: first after 250 ms, then every 3 s, 20 more times,
before it forgets the device (AOSP ``adb/transport.cpp`` ``ReconnectHandler``:
``kDefaultTimeout = 3s``, ``kMaxAttempts = 20``). A reboot therefore only has
to stop listening for a while and listen again; an unplugged phone refuses
connections until it is replugged.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
from collections.abc import Callable

import structlog

from farm.virtual.adbd.auth import AuthorizedKeys
from farm.virtual.adbd.services import AdbdNet, ServiceRouter
from farm.virtual.adbd.stream import Stream
from farm.virtual.adbd.transport import ServiceHandler, Transport
from farm.virtual.contracts import Userland

log = structlog.get_logger(__name__)

# What this adbd implements, in adbd's own order (adb/transport.cpp
# supported_features). "cmd" tells `adb install` that `cmd package` exists.
FEATURES = ("shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir")

class Adbd:
    """The phone's adb daemon, listening on ``host:port``.

    Args:
        userland: the Android side.
        net: the phone's network (device ports, ``adb reverse`` table).
        port: TCP port to listen on; 0 picks a free one at :meth:`start`.
        host: address to listen on.
        reboot_away_s: how long a reboot keeps the phone off the adb server, seconds.
    """

    def __init__(
        self,
        userland: Userland,
        net: AdbdNet,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        reboot_away_s: float,
    ) -> None:
        self._userland = userland
        self._net = net
        self.host = host
        self.port = port
        self.reboot_away_s = reboot_away_s
        self.authorized_keys = AuthorizedKeys()
        self._auth_required = False
        self._server: asyncio.AbstractServer | None = None
        self._transports: set[Transport] = set()
        self._online: list[Transport] = []
        self._names = itertools.count(17)
        self._router = ServiceRouter(userland, net, self.request_reboot)
        self.unplugged = False
        self.rebooting = False
        self._reboot_task: asyncio.Task[None] | None = None
        self.on_online_change: Callable[[bool], None] | None = None

    # --- identity -----------------------------------------------------------------

    @property
    def serial(self) -> str:
        """The serial the adb server gives this phone: ``host:port``."""
        return f"{self.host}:{self.port}"

    def banner(self) -> str:
        """The CNXN banner (``adb.cpp`` ``get_connection_string``)."""
        props = self._userland.banner_props()
        keys = ("ro.product.name", "ro.product.model", "ro.product.device")
        fields = [f"{key}={props.get(key, '')}" for key in keys]
        fields.append("features=" + ",".join(FEATURES))
        return "device::" + ";".join(fields)

    @property
    def online_transports(self) -> list[Transport]:
        """Transports that finished their handshake, oldest first."""
        return list(self._online)

    @property
    def stream_count(self) -> int:
        """Open streams over every transport (0 when the phone is idle)."""
        return sum(t.stream_count for t in self._transports)

    @property
    def online(self) -> bool:
        """Whether an adb server holds an authorized transport to this phone."""
        return bool(self._online)

    # --- listening ------------------------------------------------------------------

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen for the adb server; resolves ``port`` if it was 0.

        Args:
            sock: an already bound and listening socket to serve on (its port
                becomes ``port``); otherwise bind ``host:port``.

        Raises:
            OSError: the port is taken.
        """
        if self._server is not None:
            return
        if sock is not None:
            self._server = await asyncio.start_server(self._on_connect, sock=sock)
        else:
            self._server = await asyncio.start_server(self._on_connect, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop_listening(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), timeout=5)

    def drop_transports(self) -> None:
        """Close every transport at once, as a cable pull or an adbd crash does."""
        for transport in list(self._transports):
            transport.close()

    async def stop(self) -> None:
        """Stop listening and close every transport."""
        if self._reboot_task is not None:
            self._reboot_task.cancel()
        await self._stop_listening()
        self.drop_transports()

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.unplugged or self.rebooting:
            writer.close()
            return
        sock = writer.get_extra_info("socket")
        if sock is not None:
            # adbd disables Nagle on every accepted transport socket
            # (daemon/transport_socket_server.cpp). asyncio does not for accepted
            # sockets here, and each WRTE would then wait ~40 ms for the host's
            # delayed ACK before its OKAY.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = Transport(reader, writer, self, f"host-{next(self._names)}")
        self._transports.add(transport)
        await transport.run()

    # --- DeviceSide (called by transports) ---------------------------------------------

    @property
    def auth_required(self) -> bool:
        """Whether new transports must authenticate with an authorized key."""
        return self._auth_required

    async def resolve_service(self, name: str, transport: Transport) -> ServiceHandler | None:
        """Handler for an OPEN of ``name`` (see :class:`ServiceRouter`)."""
        handler = await self._router.resolve(name, transport)
        if handler is None:
            log.debug("adbd_open_refused", serial=self.serial, service=name)
        return handler

    def transport_online(self, transport: Transport) -> None:
        """A transport finished its handshake."""
        self._online.append(transport)
        if self.on_online_change is not None:
            self.on_online_change(True)

    def transport_closed(self, transport: Transport) -> None:
        """A transport went offline; its reverse tunnels die with it (adb_listeners.cpp)."""
        was_online = transport in self._online
        if was_online:
            self._online.remove(transport)
            self._net.remove_all_reverse()
        if transport.closed.is_set():
            self._transports.discard(transport)
        if was_online and self.on_online_change is not None:
            self.on_online_change(False)

    # --- adb reverse -------------------------------------------------------------------

    async def open_to_host(self, host_spec: str) -> tuple[Stream, Stream]:
        """:data:`farm.virtual.contracts.HostOpener`: a stream to ``host_spec`` on the host.

        Raises:
            ConnectionRefusedError: no online transport, or the host refused.
        """
        if not self._online:
            raise ConnectionRefusedError("phone is not connected to an adb server")
        stream = await self._online[-1].open_to_host(host_spec)
        return stream, stream

    # --- authorization ---------------------------------------------------------------------

    def set_auth_required(self, on: bool) -> None:
        """Demand (or stop demanding) an authorized key.

        Turning it on revokes every key and drops the transports, as "Revoke USB
        debugging authorizations" does: the adb server reconnects, fails to
        authenticate and lists the phone as ``unauthorized``. Turning it off
        lets waiting transports in, as tapping "Allow" does.
        """
        self._auth_required = on
        if on:
            self.authorized_keys.clear()
            self.drop_transports()
        else:
            for transport in list(self._transports):
                if not transport.online and transport.host_banner:
                    transport.go_online()

    def authorize(self, public_key: str) -> None:
        """Add a host key (``adbkey.pub`` line), as "Always allow from this computer" does.

        Transports waiting with that key come online at once.

        Raises:
            farm.virtual.adbd.auth.KeyFormatError: not an adb public key.
        """
        self.authorized_keys.add(public_key)
        for transport in list(self._transports):
            pending = transport.pending_public_key
            if not transport.online and pending and pending in self.authorized_keys:
                transport.go_online()

    # --- faults ---------------------------------------------------------------------------

    async def unplug(self) -> None:
        """Pull the cable: transports close and connections are refused until replugged."""
        self.unplugged = True
        await self._stop_listening()
        self.drop_transports()

    async def replug(self) -> None:
        """Plug the cable back in: listen again (the adb server reconnects)."""
        self.unplugged = False
        if not self.rebooting:
            await self.start()

    def request_reboot(self) -> None:
        """Start a reboot in the background (the ``reboot:`` service's effect)."""
        if self._reboot_task is None or self._reboot_task.done():
            self._reboot_task = asyncio.ensure_future(self.reboot())

    async def reboot(self) -> None:
        """Leave the adb server for ``reboot_away_s``, restart userland, come back."""
        if self.rebooting:
            return
        self.rebooting = True
        log.info("phone_rebooting", serial=self.serial, away_s=self.reboot_away_s)
        try:
            await self._stop_listening()
            self.drop_transports()
            await self._userland.on_shutdown()
            await asyncio.sleep(self.reboot_away_s)
            await self._userland.on_boot()
        finally:
            self.rebooting = False
        if not self.unplugged:
            await self.start()
        log.info("phone_booted", serial=self.serial)
