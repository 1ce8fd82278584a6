"""Tests for farm.tvm.relay: usb-only phones registered under their forward endpoints."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from farm.clock import wait_until
from farm.tvm.probe import probe_session
from farm.tvm.protocol import RPC_TRACKER_MAGIC, encode_frame, pack_int32, read_frame
from farm.tvm.relay import Offer, Relay, announced_port, rewrite_message
from farm.tvm.testing import Forward, LoopThread
from farm.tvm.tracker import ServerInfo, TrackerProcess, summary
from farm.virtual.net import Net

TRACKER_PORT_ON_PHONE = 9190


class TestRewriteMessage:
    def test_stock_app_put(self) -> None:
        """The app's PUT (no custom address) gets the forward host and port."""
        put = [3, "android", [5001, "android:0.25"], None]
        assert rewrite_message(put, ("127.0.0.1", 40123)) == [
            3,
            "android",
            [40123, "android:0.25"],
            "127.0.0.1",
        ]

    def test_update_info(self) -> None:
        """UPDATE_INFO's addr (null host, string port) names the forward endpoint."""
        info = [5, {"key": "server:android", "addr": [None, "5001"]}]
        assert rewrite_message(info, ("127.0.0.1", 40123)) == [
            5,
            {"key": "server:android", "addr": ["127.0.0.1", 40123]},
        ]

    def test_other_messages_pass(self) -> None:
        """Messages that name no address are not changed."""
        for message in ([7], [1], [4, "android", "", 1], "junk", []):
            assert rewrite_message(message, ("h", 1)) == message


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=12,
)
_REGISTRATION_LIKE = st.builds(
    lambda code, rest: [code, *rest], st.sampled_from([3, 5]), st.lists(_JSON, max_size=4))


class TestAnnouncedPort:
    @settings(max_examples=400, deadline=None)
    @given(st.one_of(_JSON, _REGISTRATION_LIKE))
    def test_any_json_gives_a_port_or_none_and_rewrites_safely(self, message: Any) -> None:
        """Whatever a phone sends, the port is None or 1..65535 and rewriting never raises."""
        port = announced_port(message)
        assert port is None or 0 < port < 65536
        rewritten = rewrite_message(message, ("127.0.0.1", 40000))
        if port is None:
            assert rewritten is message
        else:
            assert announced_port(rewritten) == 40000

    def test_registration_names_the_bound_port(self) -> None:
        """PUT and UPDATE_INFO carry the app's port, as an int or the stock app's string."""
        assert announced_port([3, "android", [5002, "android:0.25"], None]) == 5002
        assert announced_port([5, {"key": "server:android", "addr": [None, "5003"]}]) == 5003

    def test_other_messages_name_none(self) -> None:
        """Messages without a usable port give None, never an exception."""
        for message in ([7], [1], [5, {"key": "client:x"}], [5, {"addr": [None, "x"]}],
                        [3, "k", [True, "m"], None], [3, "k", [0, "m"], None], "junk", []):
            assert announced_port(message) is None


async def _no_forward(device_port: int) -> int:
    raise AssertionError(f"no forward expected, asked for {device_port}")


class TestRelayConnections:
    def test_phone_closing_before_magic_ends_quietly(self) -> None:
        """A phone that hangs up before its magic ends the relayed pair, logging no error."""

        async def scenario() -> list[dict[str, Any]]:
            loop = asyncio.get_running_loop()
            errors: list[dict[str, Any]] = []
            loop.set_exception_handler(lambda _loop, context: errors.append(context))
            tracker_closed = asyncio.Event()

            async def on_tracker_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
                await reader.read()  # until the relay closes its side
                writer.close()
                tracker_closed.set()

            tracker = await asyncio.start_server(on_tracker_conn, "127.0.0.1", 0)
            async with Relay(tracker.sockets[0].getsockname()[:2], _no_forward) as relay:
                _, phone = await asyncio.open_connection("127.0.0.1", relay.port)
                phone.write(b"\x00\x00")  # half a magic, then gone
                phone.close()
                await asyncio.wait_for(tracker_closed.wait(), 10)
                await asyncio.sleep(0.05)  # let the relay's handler finish
            tracker.close()
            return errors

        assert asyncio.run(scenario()) == []


class TestRelayForwards:
    def test_forward_is_made_once_per_bound_port_and_advertised(self) -> None:
        """Two registrations naming port 5002 make one forward; both are rewritten to it."""

        async def scenario() -> tuple[list[int], list[Any]]:
            received: list[Any] = []

            async def on_tracker_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
                writer.write(await reader.readexactly(4))  # magic back
                with contextlib.suppress(asyncio.IncompleteReadError):
                    while True:
                        received.append(await read_frame(reader))
                writer.close()

            calls: list[int] = []

            async def forward(device_port: int) -> int:
                calls.append(device_port)
                return 40000 + len(calls)

            tracker = await asyncio.start_server(on_tracker_conn, "127.0.0.1", 0)
            async with Relay(tracker.sockets[0].getsockname()[:2], forward) as relay:
                for _ in range(2):
                    reader, phone = await asyncio.open_connection("127.0.0.1", relay.port)
                    phone.write(pack_int32(RPC_TRACKER_MAGIC))
                    await reader.readexactly(4)
                    phone.write(encode_frame([5, {"key": "server:k", "addr": [None, "5002"]}]))
                    phone.write(encode_frame([3, "k", [5002, "k:1"], None]))
                    count = len(received)
                    while len(received) < count + 2:
                        await asyncio.sleep(0.01)
                    phone.close()
            tracker.close()
            return calls, received

        calls, received = asyncio.run(scenario())
        assert calls == [5002]
        assert received == [[5, {"key": "server:k", "addr": ["127.0.0.1", 40001]}],
                            [3, "k", [40001, "k:1"], "127.0.0.1"]] * 2

    def test_failed_forward_drops_the_connection_and_is_retried(self) -> None:
        """A forward that fails closes the phone's connection; the next registration tries again."""

        async def scenario() -> tuple[bytes, dict[int, int]]:
            async def on_tracker_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
                writer.write(await reader.readexactly(4))
                await reader.read()
                writer.close()

            attempts: list[int] = []

            async def forward(device_port: int) -> int:
                attempts.append(device_port)
                if len(attempts) == 1:
                    raise OSError("adb: device offline")
                return 41000

            tracker = await asyncio.start_server(on_tracker_conn, "127.0.0.1", 0)
            async with Relay(tracker.sockets[0].getsockname()[:2], forward) as relay:
                reader, phone = await asyncio.open_connection("127.0.0.1", relay.port)
                phone.write(pack_int32(RPC_TRACKER_MAGIC))
                await reader.readexactly(4)
                phone.write(encode_frame([3, "k", [5001, "k:1"], None]))
                rest = await asyncio.wait_for(reader.read(), 10)  # closed by the relay
                phone.close()
                assert await relay.forward_for(5001) == 41000
                forwards = dict(relay.forwards)
            tracker.close()
            return rest, forwards

        rest, forwards = asyncio.run(scenario())
        assert (rest, forwards) == (b"", {5001: 41000})


def start_usb_phone(
    aloop: LoopThread, phones, tracker: TrackerProcess, key: str, *, taken: tuple[int, ...] = ()
) -> tuple[Net, Relay, list[Forward]]:
    """A usb-only phone whose tracker traffic crosses its reverse tunnel and its relay.

    ``taken`` device ports are held by another app, so the RPC app binds the next free one.
    """
    forwards: list[Forward] = []
    relay: Relay | None = None

    def prepare(net: Net) -> None:
        nonlocal relay

        async def forward(device_port: int) -> int:
            fwd = Forward(lambda: net.connect_device_port(device_port))
            forwards.append(fwd)
            return await fwd.start()

        for port in taken:
            net.publish(port, "127.0.0.1", 1)
        relay = Relay(("127.0.0.1", tracker.port), forward)
        aloop.run(relay.start())
        net.add_reverse(f"tcp:{TRACKER_PORT_ON_PHONE}", f"tcp:{relay.port}")

    net, app = phones.start("usb-only", "127.0.0.1", TRACKER_PORT_ON_PHONE, key, prepare)
    assert relay is not None
    assert app.device_port == 5001 + len(taken)
    return net, relay, forwards


class TestRelay:
    def test_usb_only_phones_serve_through_forward_ports(
        self, aloop: LoopThread, tracker: TrackerProcess, phones, key: str
    ) -> None:
        """Two usb-only phones, on device ports 5001 and 5002, are listed and probed at
        forwards to the port each app bound."""
        setups = [start_usb_phone(aloop, phones, tracker, key, taken=taken)
                  for taken in ((), (5001,))]
        try:
            assert wait_until(lambda: all(relay.forwards for _, relay, _ in setups), 30)
            assert [list(relay.forwards) for _, relay, _ in setups] == [[5001], [5002]]
            ports = {port for _, relay, _ in setups for port in relay.forwards.values()}
            expected = {ServerInfo(key, "127.0.0.1", port) for port in ports}
            assert wait_until(
                lambda: set(summary("127.0.0.1", tracker.port).servers_for(key)) == expected, 30
            )
            probed = {
                probe_session("127.0.0.1", tracker.port, key, timeout_s=30).server_port
                for _ in range(2)
            }
            assert probed == ports
        finally:
            for _, relay, forwards in setups:
                aloop.run(relay.close())
                for forward in forwards:
                    aloop.run(forward.close())

    def test_no_reverse_no_registration(self, tracker: TrackerProcess, phones, key: str) -> None:
        """A usb-only app pointed at the host's address never reaches the tracker."""
        _, app = phones.start("usb-only", "10.0.2.2", tracker.port, key)
        assert wait_until(lambda: "round_failed" in app.log_path.read_text(), 30)
        assert summary("127.0.0.1", tracker.port).servers_for(key) == ()


class TestRelayOffer:
    def test_offer_follows_the_live_registration(self) -> None:
        """The app's PUT becomes the relay's offer (forward port, matchkey); it ends with it."""

        async def scenario() -> tuple[Any, Any]:
            async def on_tracker_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
                writer.write(await reader.readexactly(4))
                with contextlib.suppress(asyncio.IncompleteReadError):
                    while True:
                        await read_frame(reader)
                writer.close()

            async def forward(device_port: int) -> int:
                return 40000 + device_port

            tracker = await asyncio.start_server(on_tracker_conn, "127.0.0.1", 0)
            async with Relay(tracker.sockets[0].getsockname()[:2], forward) as relay:
                reader, phone = await asyncio.open_connection("127.0.0.1", relay.port)
                phone.write(pack_int32(RPC_TRACKER_MAGIC))
                await reader.readexactly(4)
                phone.write(encode_frame([3, "k", [5001, "k:0.5"], None]))
                await phone.drain()
                seen = await asyncio.wait_for(_until(lambda: relay.offer), 10)
                phone.close()
                gone = await asyncio.wait_for(_until(lambda: relay.offer is None), 10)
            tracker.close()
            return seen, gone

        seen, gone = asyncio.run(scenario())
        assert seen == Offer("k", "127.0.0.1", 45001, "k:0.5")
        assert gone is True


async def _until(predicate: Any) -> Any:
    """Poll ``predicate`` on the loop until it is truthy; return its value."""
    while not (value := predicate()):
        await asyncio.sleep(0.01)
    return value
