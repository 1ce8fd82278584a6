"""adb forward and adb reverse through the virtual phone's transport."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable, Iterator

import adbutils
import pytest

from farm.adb import Adb, AdbServer
from farm.netaddr import free_port
from farm.queue.models import DeviceState
from farm.testing import FleetHarness
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data.upper())


@pytest.fixture
def echo_port() -> Iterator[int]:
    """A host TCP server on loopback that answers every chunk upper-cased."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _round_trip(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


class TestForward:
    def test_forward_reaches_a_device_port(
        self, adb_server: AdbServerHandle, make_fleet, echo_port: int
    ) -> None:
        """`adb forward tcp:H tcp:D` carries bytes both ways to the app listening on device port
        D."""
        fleet = make_fleet(1, "usb-only")
        serial = fleet.serials[0]
        phone = fleet.phone(serial)
        fleet.call(lambda: phone.net.publish(7001, "127.0.0.1", echo_port))
        host_port = free_port()
        done = adb_server.adb("-s", serial, "forward", f"tcp:{host_port}", "tcp:7001")
        assert done.returncode == 0, done.stderr
        payload = b"hello phone " * 20000
        assert _round_trip(host_port, payload) == payload.upper()

    def test_forward_tcp0_takes_the_port_the_adb_server_bound(
        self, adb_server: AdbServerHandle, make_fleet, echo_port: int
    ) -> None:
        """`forward(serial, "tcp:0", ...)` returns the port adb bound, listed and carrying bytes."""
        fleet = make_fleet(1, "usb-only")
        serial = fleet.serials[0]
        phone = fleet.phone(serial)
        fleet.call(lambda: phone.net.publish(7003, "127.0.0.1", echo_port))
        host_port = Adb(AdbServer(port=adb_server.port)).forward(
            serial, "tcp:0", "tcp:7003", timeout_s=15)
        listed = adb_server.adb("forward", "--list").stdout.split()
        assert listed == [serial, f"tcp:{host_port}", "tcp:7003"]
        assert _round_trip(host_port, b"abc") == b"ABC"

    def test_forward_to_closed_port_is_refused(
        self, adb_server: AdbServerHandle, make_fleet
    ) -> None:
        """A forward to a device port nobody listens on is closed at once (adbd answers CLSE)."""
        serial = make_fleet(1, "usb-only").serials[0]
        host_port = free_port()
        adb_server.adb("-s", serial, "forward", f"tcp:{host_port}", "tcp:7002")
        with socket.create_connection(("127.0.0.1", host_port), timeout=10) as sock:
            sock.sendall(b"x")
            assert sock.recv(10) == b""


class TestReverse:
    def test_reverse_carries_bytes_from_the_phone_to_the_host(
        self, adb_server: AdbServerHandle, make_fleet, echo_port: int
    ) -> None:
        """A phone app connecting to 127.0.0.1:D reaches the host's port through `adb reverse`."""
        fleet = make_fleet(1, "usb-only")
        serial = fleet.serials[0]
        phone = fleet.phone(serial)
        done = adb_server.adb("-s", serial, "reverse", "tcp:9190", f"tcp:{echo_port}")
        assert done.returncode == 0, done.stderr
        _real_host, real_port = fleet.run(lambda: phone.net.outbound("127.0.0.1", 9190))
        payload = b"tracker hello " * 20000
        assert _round_trip(real_port, payload) == payload.upper()

    def test_reverse_list_and_remove(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """`adb reverse --list` shows adbd's lines; --remove and --remove-all clear them."""
        serial = make_fleet(1).serials[0]
        assert adb_server.adb("-s", serial, "reverse", "tcp:9190", "tcp:9190").returncode == 0
        assert adb_server.adb("-s", serial, "reverse", "tcp:9191", "tcp:9000").returncode == 0
        # The adb client prints adbd's string and a newline of its own.
        listed = adb_server.adb("-s", serial, "reverse", "--list").stdout.splitlines()[:-1]
        assert [line.split()[1:] for line in listed] == [
            ["tcp:9190", "tcp:9190"],
            ["tcp:9191", "tcp:9000"],
        ]
        assert all(line.startswith("host-") for line in listed)
        assert adb_server.adb("-s", serial, "reverse", "--remove", "tcp:9190").returncode == 0
        device = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(serial)
        assert [(r.remote, r.local) for r in device.reverse_list()] == [("tcp:9191", "tcp:9000")]
        assert adb_server.adb("-s", serial, "reverse", "--remove-all").returncode == 0
        assert adb_server.adb("-s", serial, "reverse", "--list").stdout.strip() == ""

    def test_reverse_errors_are_adbds(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """norebind on a taken port and removing an unknown tunnel fail with adbd's messages."""
        serial = make_fleet(1).serials[0]
        adb_server.adb("-s", serial, "reverse", "tcp:9190", "tcp:9190")
        taken = adb_server.adb("-s", serial, "reverse", "--no-rebind", "tcp:9190", "tcp:9191")
        assert (taken.returncode, taken.stderr.strip()) == (
            1,
            "adb: error: cannot rebind existing socket",
        )
        missing = adb_server.adb("-s", serial, "reverse", "--remove", "tcp:9999")
        assert (missing.returncode, missing.stderr.strip()) == (
            1,
            "adb: error: listener 'tcp:9999' not found",
        )


class TestUsbOnlyBoundPort:
    def test_apps_on_ports_other_than_5001_serve_sessions(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., FleetHarness]
    ) -> None:
        """usb-only phones whose apps bind 5002 and 5003 (another app holds the ports below)
        register at forwards to those ports and serve real sessions."""
        from farm.tvm.probe import probe_session

        phones = make_fleet(2, network="usb-only")
        for serial, taken in zip(phones.serials, ((5001,), (5001, 5002)), strict=True):
            net = phones.phone(serial).net
            for port in taken:  # another app listening there, as the stock app would meet it
                phones.call(lambda net=net, port=port: net.publish(port, "127.0.0.1", 1))
        farm = make_farm()
        farm.wait_state(phones.serials, DeviceState.READY, 150)
        tunnels = [farm.manager.runtime(s).tunnel for s in phones.serials]
        assert [list(t.forward_ports) for t in tunnels if t is not None] == [[5002], [5003]]
        for serial, tunnel in zip(phones.serials, tunnels, strict=True):
            assert tunnel is not None
            (host_port,) = tunnel.forward_ports.values()
            key = farm.manager.runtime(serial).key
            assert probe_session(*farm.tracker_addr, key, timeout_s=60).server_port == host_port

    def test_lan_phones_under_a_usb_only_farm_serve_sessions(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., FleetHarness]
    ) -> None:
        """lan phones (apps on 5001, 5002, ... of the shared host) under a usb-only farm get
        forwards to the port each app bound, and both serve sessions (issue 10's
        `--virtual-phones` failure: every forward went to 5001)."""
        from farm.tvm.probe import probe_session

        phones = make_fleet(2, network="lan")
        farm = make_farm()
        farm.wait_state(phones.serials, DeviceState.READY, 150)
        bound = {phones.phone(s).android.app.rpc.device_port for s in phones.serials}  # type: ignore[union-attr]
        assert len(bound) == 2
        for serial in phones.serials:
            tunnel = farm.manager.runtime(serial).tunnel
            assert tunnel is not None
            assert list(tunnel.forward_ports) == [phones.phone(serial).android.app.rpc.device_port]  # type: ignore[union-attr]
            (host_port,) = tunnel.forward_ports.values()
            key = farm.manager.runtime(serial).key
            assert probe_session(*farm.tracker_addr, key, timeout_s=60).server_port == host_port
