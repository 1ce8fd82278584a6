"""Tests for farm.virtual.rpc_process and rpc_server_main: the RPC app's process."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from farm.clock import wait_until
from farm.tvm import protocol
from farm.tvm.testing import LoopThread
from farm.tvm.tracker import TrackerProcess, summary
from farm.virtual.net import Net, parse_tcp_spec
from farm.virtual.rpc_process import RpcProcess, RpcStartError, bind_device_port
from farm.virtual.rpc_server_main import HARD_TIMEOUT_DEFAULT_S, parse_timeout_s


async def refusing_opener(host_spec: str) -> Any:
    """A host side that refuses every reverse stream."""
    raise ConnectionRefusedError(host_spec)


async def tcp_opener(host_spec: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """What the adb server does for a reverse tunnel on the host: a real TCP connect."""
    return await asyncio.open_connection("127.0.0.1", parse_tcp_spec(host_spec))


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (zombies wait for their reaper)."""
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and (proc.info["status"] != psutil.STATUS_ZOMBIE):
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def events(log_path: Path) -> list[str]:
    """Event names in an RPC process log (JSON lines; other lines are stderr)."""
    names = []
    for line in log_path.read_text().splitlines():
        try:
            names.append(json.loads(line)["event"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return names


class TestTimeoutParsing:
    def test_integer_timeout(self) -> None:
        """-timeout=N gives N seconds."""
        assert parse_timeout_s("client:android:0.5 -timeout=10") == 10

    def test_default_timeout(self) -> None:
        """No -timeout= gives the app's 300 s default."""
        assert parse_timeout_s("client:android:0.5") == HARD_TIMEOUT_DEFAULT_S == 300

    def test_float_timeout_is_rejected(self) -> None:
        """A float fails as Integer.parseInt does."""
        with pytest.raises(ValueError):
            parse_timeout_s("client:android:0.5 -timeout=1.5")


def pick_device_port(net: Net, first_port: int = 5001) -> int:
    """The device port :func:`bind_device_port` takes, its listener closed again."""
    port, listener = bind_device_port(net, first_port)
    listener.close()
    return port


class TestBindDevicePort:
    def test_first_free_from_5001(self) -> None:
        """An empty usb-only phone binds 5001."""
        assert pick_device_port(Net("usb-only", refusing_opener)) == 5001

    def test_skips_ports_held_on_the_phone(self) -> None:
        """Ports held by an app or a reverse listener are skipped."""
        net = Net("usb-only", refusing_opener)
        net.publish(5001, "127.0.0.1", 1)
        net.add_reverse("tcp:5002", "tcp:9190")
        assert pick_device_port(net) == 5003

    def test_lan_skips_ports_busy_on_the_host(self) -> None:
        """In lan mode a port taken on the host is taken for the phone too."""
        for port in range(5001, 5555):
            holder = socket.socket()
            try:
                holder.bind(("127.0.0.1", port))
            except OSError:
                holder.close()
                continue
            break
        with holder:
            holder.listen(1)
            assert pick_device_port(Net("lan", refusing_opener), first_port=port) > port

    def test_exhausted_range_fails(self) -> None:
        """No free port up to 5555 is an RpcStartError."""
        net = Net("usb-only", refusing_opener)
        net.publish(5555, "127.0.0.1", 1)
        with pytest.raises(RpcStartError):
            pick_device_port(net, first_port=5555)


class TestRpcProcess:
    def test_usb_only_phones_each_bind_5001(self, tmp_path: Path) -> None:
        """Two usb-only phones both get device port 5001 on different real ports."""

        async def body() -> None:
            nets = [Net("usb-only", refusing_opener) for _ in range(2)]
            apps = [
                await RpcProcess.start(net=net, tracker_host="127.0.0.1", tracker_port=9190,
                                       key="android", log_path=tmp_path / f"{i}.log")
                for i, net in enumerate(nets)
            ]  # fmt: skip
            try:
                assert [app.device_port for app in apps] == [5001, 5001]
                assert apps[0].real_port != apps[1].real_port
                assert all(net.device_port_in_use(5001) for net in nets)
            finally:
                for app in apps:
                    await app.stop()
                for net in nets:
                    await net.close()

        asyncio.run(asyncio.wait_for(body(), timeout=60))

    def test_lan_phones_started_together_get_different_ports(self, tmp_path: Path) -> None:
        """Lan phones share the host's ports: two started at once never take the same one."""

        async def body() -> None:
            nets = [Net("lan", refusing_opener) for _ in range(2)]
            starts = [RpcProcess.start(net=net, tracker_host="10.0.2.2", tracker_port=1,
                                       key="android", log_path=tmp_path / f"{i}.log")
                      for i, net in enumerate(nets)]  # fmt: skip
            results = await asyncio.gather(*starts, return_exceptions=True)
            try:
                apps = [r for r in results if isinstance(r, RpcProcess)]
                assert len(apps) == 2, results
                assert apps[0].device_port != apps[1].device_port
                assert all(app.alive() for app in apps)
            finally:
                for result in results:
                    if isinstance(result, RpcProcess):
                        await result.stop()
                for net in nets:
                    await net.close()

        asyncio.run(asyncio.wait_for(body(), timeout=120))

    def test_stop_kills_group_and_unpublishes(self, tmp_path: Path) -> None:
        """stop() SIGKILLs the whole group, reaps it and frees the device port."""

        async def body() -> tuple[int, int, Net]:
            net = Net("lan", refusing_opener)
            app = await RpcProcess.start(net=net, tracker_host="10.0.2.2", tracker_port=1,
                                         key="android", log_path=tmp_path / "rpc.log")  # fmt: skip
            assert app.alive() and app.device_port == app.real_port
            code = await app.stop()
            assert await app.stop() == code  # idempotent
            await net.close()
            return code, app.pid, net

        code, pid, net = asyncio.run(asyncio.wait_for(body(), timeout=60))
        assert code == -9
        assert wait_until(lambda: not group_alive(pid), 10)
        assert not net.device_port_in_use(5001)


@pytest.fixture(scope="module")
def tracker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrackerProcess]:
    """A real tracker for the session tests."""
    with TrackerProcess.start(log_path=tmp_path_factory.mktemp("t") / "t.log") as process:
        yield process


@pytest.fixture
def lan_app(tracker: TrackerProcess, tmp_path: Path) -> Iterator[tuple[RpcProcess, LoopThread]]:
    """A lan phone's RPC app registered under key ``timeouts``."""
    aloop = LoopThread()
    net = Net("lan", tcp_opener)
    app = aloop.run(RpcProcess.start(net=net, tracker_host="10.0.2.2", tracker_port=tracker.port,
                                     key="timeouts", log_path=tmp_path / "rpc.log"))  # fmt: skip
    assert wait_until(lambda: summary("127.0.0.1", tracker.port).servers_for("timeouts"), 30)
    yield app, aloop
    aloop.run(app.stop())
    aloop.run(net.close())
    aloop.close()


def handshake(
    tracker: TrackerProcess, client_key_suffix: str, wrong_key: bool = False
) -> tuple[int | None, socket.socket]:
    """Take a ticket for ``timeouts`` and greet the server as TVM's client does.

    Returns the server's reply code (None if it closed without one) and the socket.
    """
    deadline = time.monotonic() + 10
    with protocol.open_tracker("127.0.0.1", tracker.port, deadline) as sock:
        reply = protocol.call(sock, [protocol.TrackerCode.REQUEST, "timeouts", "", 1], deadline)
    host, port, matchkey = reply[1]
    key = f"client:{'nope:1' if wrong_key else matchkey}{client_key_suffix}".encode()
    conn = socket.create_connection((host, int(port)), timeout=10)
    conn.sendall(struct.pack("<ii", protocol.RPC_MAGIC, len(key)) + key)
    reply_code = conn.recv(4)
    return (struct.unpack("<i", reply_code)[0] if len(reply_code) == 4 else None), conn


class TestSessions:
    def test_session_past_timeout_ends_the_process(
        self, tracker: TrackerProcess, lan_app: tuple[RpcProcess, LoopThread]
    ) -> None:
        """A session held past -timeout=1 makes the process exit 0, as the watchdog does."""
        app, aloop = lan_app
        code, conn = handshake(tracker, " -timeout=1")
        with conn:
            assert code == protocol.RPC_CODE_SUCCESS
            assert aloop.run(app.wait(), timeout_s=30) == 0
        assert "session_timeout" in events(app.log_path)

    def test_float_timeout_fails_the_round(
        self, tracker: TrackerProcess, lan_app: tuple[RpcProcess, LoopThread]
    ) -> None:
        """-timeout=1.5 is refused as the app's Integer.parseInt does; the process lives on."""
        app, _ = lan_app
        code, conn = handshake(tracker, " -timeout=1.5")
        conn.close()
        assert code is None
        assert wait_until(lambda: "round_failed" in events(app.log_path), 10)
        assert app.alive()

    def test_wrong_matchkey_is_refused(
        self, tracker: TrackerProcess, lan_app: tuple[RpcProcess, LoopThread]
    ) -> None:
        """A client without the match key gets RPC_CODE_MISMATCH."""
        code, conn = handshake(tracker, "", wrong_key=True)
        conn.close()
        assert code == protocol.RPC_CODE_MISMATCH


#: The app's accept timeout here: long enough that, on a loaded 2-core host, the ticket
#: is surely taken (and checked) before the app's next look at the tracker.
STALE_S = 10.0


class TestStaleRegistration:
    def test_unused_ticket_is_registered_again(
        self, tracker: TrackerProcess, tmp_path: Path
    ) -> None:
        """After the accept timeout an app whose ticket was taken but unused registers again."""
        aloop = LoopThread()
        net = Net("lan", tcp_opener)
        app: RpcProcess | None = None
        try:
            app = aloop.run(
                RpcProcess.start(
                    net=net,
                    tracker_host="10.0.2.2",
                    tracker_port=tracker.port,
                    key="stale",
                    log_path=tmp_path / "rpc.log",
                    stale_timeout_s=STALE_S,
                )
            )

            def free_servers() -> int:
                return summary("127.0.0.1", tracker.port).queue("stale").free

            assert wait_until(lambda: free_servers() == 1, 30)
            deadline = time.monotonic() + 10
            with protocol.open_tracker("127.0.0.1", tracker.port, deadline) as sock:
                protocol.call(sock, [protocol.TrackerCode.REQUEST, "stale", "", 1], deadline)
            assert free_servers() == 0  # the ticket is taken until the app looks again
            assert wait_until(lambda: free_servers() == 1, STALE_S + 20)
            # The app logs "registered" once the tracker answered its PUT, which the
            # tracker's summary may show first.
            assert wait_until(lambda: events(app.log_path).count("registered") >= 2, 10)
        finally:
            if app is not None:
                aloop.run(app.stop())
            aloop.run(net.close())
            aloop.close()
