"""Tests for farm.virtual.net: the phone's ports, reverse table and outbound routes."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import psutil
import pytest

from farm.virtual.net import Net, ReverseError, is_loopback, parse_tcp_spec


def run(coro: Awaitable[Any]) -> Any:
    """Run one coroutine on a fresh loop with a hard deadline."""

    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout=20)

    return asyncio.run(bounded())


class TcpOpener:
    """What the adb server does on the host for a reverse tunnel: a real TCP connect."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    async def __call__(self, host_spec: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.opened.append(host_spec)
        return await asyncio.open_connection("127.0.0.1", parse_tcp_spec(host_spec))


def non_loopback_ipv4() -> str | None:
    """An IPv4 address of this machine outside 127.0.0.0/8, or None."""
    for addrs in psutil.net_if_addrs().values():
        for addr in addrs:
            if addr.family == socket.AF_INET and not addr.address.startswith("127."):
                return str(addr.address)
    return None


async def echo_server(tag: bytes, host: str = "127.0.0.1") -> tuple[asyncio.AbstractServer, int]:
    """A loopback server that answers each chunk with ``tag + chunk``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(tag + data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, host, 0)
    return server, server.sockets[0].getsockname()[1]


async def roundtrip(host: str, port: int, payload: bytes = b"ping") -> bytes:
    """Send ``payload`` and return the reply (up to 64 bytes); b"" if closed or reset."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(payload)
        await writer.drain()
        return await reader.read(64)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


def with_net(mode: str, body: Callable[[Net, TcpOpener], Awaitable[Any]]) -> Any:
    """Run ``body(net, opener)`` and close the net afterwards."""

    async def main() -> Any:
        opener = TcpOpener()
        net = Net(mode, opener)  # type: ignore[arg-type]
        try:
            return await body(net, opener)
        finally:
            await net.close()

    return run(main())


class TestSpecs:
    def test_tcp_spec_parses_port(self) -> None:
        """A tcp:PORT spec yields its port."""
        assert parse_tcp_spec("tcp:5001") == 5001

    @pytest.mark.parametrize("spec", ["tcp:0", "tcp:x", "localabstract:foo", "tcp:70000"])
    def test_unsupported_spec_is_refused(self, spec: str) -> None:
        """Specs the model does not handle raise ReverseError, not a crash."""
        with pytest.raises(ReverseError):
            parse_tcp_spec(spec)

    @pytest.mark.parametrize(
        ("host", "expected"),
        [
            ("127.0.0.1", True),
            ("127.3.2.1", True),
            ("localhost", True),
            ("::1", True),
            ("10.0.2.2", False),
            ("192.168.1.5", False),
            ("example.org", False),
        ],
    )
    def test_loopback_detection(self, host: str, expected: bool) -> None:
        """Only the phone's own loopback names count as loopback."""
        assert is_loopback(host) is expected


class TestReverseTable:
    def test_add_list_remove(self) -> None:
        """Tunnels are listed in creation order and removed one by one or all at once."""
        net = Net("usb-only", TcpOpener())
        net.add_reverse("tcp:9190", "tcp:40000")
        net.add_reverse("tcp:5002", "tcp:40001")
        assert net.list_reverse() == [("tcp:9190", "tcp:40000"), ("tcp:5002", "tcp:40001")]
        net.remove_reverse("tcp:9190")
        assert net.list_reverse() == [("tcp:5002", "tcp:40001")]
        net.remove_all_reverse()
        assert net.list_reverse() == []

    def test_rebind_replaces_unless_norebind(self) -> None:
        """Rebinding replaces the target; with norebind it fails with adbd's text."""
        net = Net("usb-only", TcpOpener())
        net.add_reverse("tcp:9190", "tcp:40000")
        net.add_reverse("tcp:9190", "tcp:40001")
        assert net.list_reverse() == [("tcp:9190", "tcp:40001")]
        with pytest.raises(ReverseError, match="cannot rebind existing socket"):
            net.add_reverse("tcp:9190", "tcp:40002", norebind=True)

    def test_remove_unknown_fails(self) -> None:
        """Removing a tunnel that does not exist fails as adbd does."""
        net = Net("lan", TcpOpener())
        with pytest.raises(ReverseError, match="listener 'tcp:1' not found"):
            net.remove_reverse("tcp:1")

    def test_reverse_on_app_port_fails(self) -> None:
        """A reverse listener cannot take a device port an app already holds."""
        net = Net("lan", TcpOpener())
        net.publish(5001, "127.0.0.1", 40000)
        with pytest.raises(ReverseError, match="Address already in use"):
            net.add_reverse("tcp:5001", "tcp:9190")

    def test_reverse_marks_port_in_use(self) -> None:
        """A reversed device port is in use, so an app skips it."""
        net = Net("usb-only", TcpOpener())
        assert not net.device_port_in_use(9190)
        net.add_reverse("tcp:9190", "tcp:40000")
        assert net.device_port_in_use(9190)


class TestDevicePorts:
    def test_connect_published_port(self) -> None:
        """adbd's tcp:PORT reaches the real listener behind a published device port."""

        async def body(net: Net, _: TcpOpener) -> bytes:
            server, port = await echo_server(b"app:")
            async with server:
                net.publish(5001, "127.0.0.1", port)
                reader, writer = await net.connect_device_port(5001)
                writer.write(b"hi")
                await writer.drain()
                data = await reader.read(64)
                writer.close()
                return data

        assert with_net("usb-only", body) == b"app:hi"

    def test_connect_unpublished_port_is_refused(self) -> None:
        """Nothing published on the port: ConnectionRefusedError."""

        async def body(net: Net, _: TcpOpener) -> None:
            net.publish(5001, "127.0.0.1", 1)
            net.unpublish(5001)
            with pytest.raises(ConnectionRefusedError):
                await net.connect_device_port(5001)

        with_net("usb-only", body)


class TestOutbound:
    def test_loopback_through_reverse_uses_host_opener(self) -> None:
        """127.0.0.1:P with a reverse tunnel reaches the host through the opener."""

        async def body(net: Net, opener: TcpOpener) -> tuple[bytes, list[str]]:
            server, port = await echo_server(b"host:")
            async with server:
                net.add_reverse("tcp:9190", f"tcp:{port}")
                endpoint = await net.outbound("127.0.0.1", 9190)
                return await roundtrip(*endpoint), opener.opened

        data, opened = with_net("usb-only", body)
        assert data == b"host:ping"
        assert opened == [opened[0]] and opened[0].startswith("tcp:")

    def test_reverse_is_decided_at_connect_time(self) -> None:
        """Removing the tunnel makes the same cached endpoint refuse the next connection."""

        async def body(net: Net, _: TcpOpener) -> tuple[bytes, bytes]:
            server, port = await echo_server(b"host:")
            async with server:
                net.add_reverse("tcp:9190", f"tcp:{port}")
                endpoint = await net.outbound("127.0.0.1", 9190)
                first = await roundtrip(*endpoint)
                net.remove_reverse("tcp:9190")
                assert await net.outbound("127.0.0.1", 9190) == endpoint
                return first, await roundtrip(*endpoint)

        assert with_net("usb-only", body) == (b"host:ping", b"")

    def test_loopback_reaches_published_port(self) -> None:
        """127.0.0.1:P without a tunnel reaches the phone's own listener on P."""

        async def body(net: Net, _: TcpOpener) -> bytes:
            server, port = await echo_server(b"app:")
            async with server:
                net.publish(5001, "127.0.0.1", port)
                return await roundtrip(*await net.outbound("localhost", 5001))

        assert with_net("usb-only", body) == b"app:ping"

    def test_emulator_alias_reaches_host_in_lan(self) -> None:
        """10.0.2.2 is the host's loopback in lan mode."""

        async def body(net: Net, _: TcpOpener) -> bytes:
            server, port = await echo_server(b"host:")
            async with server:
                return await roundtrip(*await net.outbound("10.0.2.2", port))

        assert with_net("lan", body) == b"host:ping"

    def test_direct_address_in_lan(self) -> None:
        """A host address that is not loopback is reached directly in lan mode."""
        host_ip = non_loopback_ipv4()
        if host_ip is None:
            pytest.skip("this machine has no non-loopback IPv4 address")

        async def body(net: Net, _: TcpOpener) -> bytes:
            server, port = await echo_server(b"host:", host_ip)
            async with server:
                return await roundtrip(*await net.outbound(host_ip, port))

        assert with_net("lan", body) == b"host:ping"

    def test_phone_loopback_is_not_the_host(self) -> None:
        """127.0.0.1 is the phone's own: a host listener there is not reached."""

        async def body(net: Net, _: TcpOpener) -> bytes:
            server, port = await echo_server(b"host:")
            async with server:
                return await roundtrip(*await net.outbound("127.0.0.1", port))

        assert with_net("lan", body) == b""

    @pytest.mark.parametrize("host", ["10.0.2.2", "192.0.2.10"])
    def test_usb_only_refuses_host_addresses(self, host: str) -> None:
        """In usb-only mode host addresses get an endpoint that closes at once."""

        async def body(net: Net, _: TcpOpener) -> bytes:
            server, port = await echo_server(b"host:")
            async with server:
                return await roundtrip(*await net.outbound(host, port))

        assert with_net("usb-only", body) == b""

    def test_endpoints_are_cached_per_target(self) -> None:
        """The same target gets the same endpoint; another target another one."""

        async def body(net: Net, _: TcpOpener) -> tuple[tuple[str, int], ...]:
            return (
                await net.outbound("10.0.2.2", 9190),
                await net.outbound("10.0.2.2", 9190),
                await net.outbound("10.0.2.2", 9191),
            )

        a, b, c = with_net("lan", body)
        assert a == b and a != c and a[0] == "127.0.0.1"

    def test_close_cuts_open_connections(self) -> None:
        """close() ends a connection the phone holds through a bridge."""

        async def body(net: Net, _: TcpOpener) -> bytes:
            server, port = await echo_server(b"host:")
            async with server:
                reader, writer = await asyncio.open_connection(
                    *await net.outbound("10.0.2.2", port)
                )
                writer.write(b"x")
                await writer.drain()
                assert await reader.read(64) == b"host:x"
                await net.close()
                data = await asyncio.wait_for(reader.read(64), timeout=5)
                writer.close()
                return data

        assert with_net("lan", body) == b""
