"""A virtual phone's network namespace: device ports, ``adb reverse`` and reachability.

The phone's processes are real host processes, so "connecting as the phone
would" needs real endpoints. :meth:`Net.outbound` hands out one loopback
*bridge* listener per target (created lazily, cached). Every connection to a
bridge is routed at connect time, as the phone's kernel would route it:

=====================  =====================================  ===============
target                 ``lan``                                ``usb-only``
=====================  =====================================  ===============
127.0.0.0/8, ::1,      ``adb reverse`` for that port if one   same
localhost              exists (bytes cross the adb transport
                       through ``host_opener``), else the
                       published device port, else refused
10.0.2.2               the host's loopback (the Android       refused
                       emulator's alias, see developer.android
                       .com/studio/run/emulator-networking)
any other address      direct                                 refused
=====================  =====================================  ===============

"Refused" means the bridge accepts and closes at once, the way a firewall
that resets looks to an app. Bridges also let :meth:`Net.close` cut every
connection the phone made, as a power-off does.

The reverse table is what adbd keeps for ``reverse:forward:<device>;<host>``
(AOSP ``adb/SERVICES.TXT``, ``adb/adb_listeners.cpp``); its error texts are
adbd's, so the transport can send ``str(exc)`` in a FAIL reply.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from farm.aio import StreamReaderLike, StreamWriterLike, splice
from farm.netaddr import is_loopback
from farm.virtual.contracts import HostOpener, NetworkMode

EMULATOR_HOST_ALIAS = "10.0.2.2"


class ReverseError(Exception):
    """``adb reverse`` refused; ``str(exc)`` is adbd's FAIL text.

    Not a FarmError: it never leaves the virtual phone. The transport turns it
    into the FAIL reply the adb server shows as ``adb: error: ...``.
    """


def parse_tcp_spec(spec: str) -> int:
    """Port of a ``tcp:PORT`` socket spec.

    Raises:
        ReverseError: not ``tcp:`` with a port in 1..65535. ``tcp:0`` (adbd picks
            a port) and ``localabstract:`` are not modelled.
    """
    kind, _, rest = spec.partition(":")
    if kind != "tcp" or not rest.isdigit() or not 0 < int(rest) < 65536:
        raise ReverseError(f"cannot bind listener: unsupported socket spec '{spec}'")
    return int(rest)


@dataclass(frozen=True)
class _Bridge:
    server: asyncio.AbstractServer
    real_port: int


class Net:
    """One phone's network (implements :class:`farm.virtual.contracts.PhoneNet`).

    Args:
        mode: ``lan`` (reaches host addresses directly) or ``usb-only``.
        host_opener: opens a stream to the host through the adb transport,
            e.g. ``host_opener("tcp:9190")``, for ``adb reverse`` tunnels.
    """

    def __init__(self, mode: NetworkMode, host_opener: HostOpener) -> None:
        if mode not in ("lan", "usb-only"):
            raise ValueError(f"unknown network mode {mode!r}")
        self.mode: NetworkMode = mode
        self._host_opener = host_opener
        self._published: dict[int, tuple[str, int]] = {}
        self._reverse: dict[str, str] = {}
        self._bridges: dict[tuple[str, int], _Bridge] = {}
        self._bridge_lock = asyncio.Lock()
        self._open_writers: set[StreamWriterLike] = set()

    # --- device-side listeners --------------------------------------------------

    def publish(self, device_port: int, real_host: str, real_port: int) -> None:
        """Declare that device port ``device_port`` is served by ``real_host:real_port``."""
        self._published[device_port] = (real_host, real_port)

    def unpublish(self, device_port: int) -> None:
        """Forget a device port; unknown ports are ignored (idempotent)."""
        self._published.pop(device_port, None)

    def device_port_in_use(self, device_port: int) -> bool:
        """Whether an app or an adbd reverse listener holds ``device_port``."""
        return device_port in self._published or f"tcp:{device_port}" in self._reverse

    async def connect_device_port(
        self, device_port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Open a stream to a listener on the phone, for adbd's ``tcp:PORT`` service.

        Raises:
            ConnectionRefusedError: nothing listens on ``device_port``.
        """
        target = self._published.get(device_port)
        if target is None:
            raise ConnectionRefusedError(f"nothing listens on device port {device_port}")
        return await asyncio.open_connection(*target)

    # --- adb reverse ------------------------------------------------------------

    def add_reverse(self, device_spec: str, host_spec: str, *, norebind: bool = False) -> None:
        """Listen on ``device_spec`` on the phone and tunnel to ``host_spec`` on the host.

        Raises:
            ReverseError: bad spec; ``norebind`` and the spec is taken ("cannot
                rebind existing socket"); or an app already holds the port.
        """
        device_port = parse_tcp_spec(device_spec)
        parse_tcp_spec(host_spec)
        if device_spec in self._reverse:
            if norebind:
                raise ReverseError("cannot rebind existing socket")
        elif device_port in self._published:
            raise ReverseError(f"cannot bind listener: {device_spec}: Address already in use")
        self._reverse[device_spec] = host_spec

    def remove_reverse(self, device_spec: str) -> None:
        """Remove one tunnel.

        Raises:
            ReverseError: no tunnel on ``device_spec`` ("listener '...' not found").
        """
        if self._reverse.pop(device_spec, None) is None:
            raise ReverseError(f"listener '{device_spec}' not found")

    def remove_all_reverse(self) -> None:
        """Remove every tunnel (``reverse:killforward-all``)."""
        self._reverse.clear()

    def list_reverse(self) -> list[tuple[str, str]]:
        """``(device_spec, host_spec)`` pairs in creation order."""
        return list(self._reverse.items())

    # --- outbound ---------------------------------------------------------------

    async def outbound(self, host: str, port: int) -> tuple[str, int]:
        """A real loopback endpoint that reaches ``host:port`` as the phone would.

        See the module docstring for the routing table.
        """
        key = (host, port)
        async with self._bridge_lock:
            bridge = self._bridges.get(key)
            if bridge is None:
                server = await asyncio.start_server(
                    lambda r, w: self._on_bridge_conn(key, r, w), "127.0.0.1", 0
                )
                real_port = server.sockets[0].getsockname()[1]
                bridge = _Bridge(server, real_port)
                self._bridges[key] = bridge
        return ("127.0.0.1", bridge.real_port)

    async def _open_route(
        self, host: str, port: int
    ) -> tuple[StreamReaderLike, StreamWriterLike] | None:
        """The stream ``host:port`` leads to right now, or None when unreachable."""
        if is_loopback(host):
            host_spec = self._reverse.get(f"tcp:{port}")
            if host_spec is not None:
                return await self._host_opener(host_spec)
            target = self._published.get(port)
            if target is None:
                return None
            return await asyncio.open_connection(*target)
        if self.mode != "lan":
            return None
        real_host = "127.0.0.1" if host == EMULATOR_HOST_ALIAS else host
        return await asyncio.open_connection(real_host, port)

    async def _on_bridge_conn(
        self,
        key: tuple[str, int],
        phone_reader: asyncio.StreamReader,
        phone_writer: asyncio.StreamWriter,
    ) -> None:
        self._open_writers.add(phone_writer)
        try:
            try:
                route = await self._open_route(*key)
            except OSError:
                route = None
            if route is None:
                return
            far_reader, far_writer = route
            self._open_writers.add(far_writer)
            try:
                await splice(phone_reader, phone_writer, far_reader, far_writer)
            finally:
                self._open_writers.discard(far_writer)
                far_writer.close()
        finally:
            self._open_writers.discard(phone_writer)
            phone_writer.close()

    async def close(self) -> None:
        """End every bridge listener and every connection through them."""
        bridges, self._bridges = list(self._bridges.values()), {}
        for bridge in bridges:
            bridge.server.close()
        for writer in list(self._open_writers):
            writer.close()
        for bridge in bridges:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(bridge.server.wait_closed(), timeout=5)
