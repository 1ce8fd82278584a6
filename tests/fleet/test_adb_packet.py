"""adbd's pure parts: packet codec, adb keys, shell service names, reverse replies, flow control.

No adb server here; these pin the wire formats the end-to-end tests rely on.
"""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from farm.virtual.adbd.auth import (
    AuthorizedKeys,
    KeyFormatError,
    encode_public_key,
    parse_public_key,
    sign_token,
    verify_token,
)
from farm.virtual.adbd.packet import (
    A_CNXN,
    A_OKAY,
    A_WRTE,
    HEADER_BYTES,
    Packet,
    ProtocolError,
    checksum,
    decode_header,
    read_packet,
)
from farm.virtual.adbd.services import protocol_string, reverse_reply
from farm.virtual.adbd.shell import ID_EXIT, ID_STDOUT, encode_packet, parse_shell_service
from farm.virtual.adbd.stream import Stream
from farm.virtual.net import Net


class TestPacket:
    def test_header_layout_matches_protocol_txt(self) -> None:
        """A packet is six little-endian u32s (command, arg0, arg1, length, checksum, magic) then
        data."""
        raw = Packet(A_CNXN, 0x01000001, 4096, b"host::").encode()
        fields = struct.unpack("<6I", raw[:HEADER_BYTES])
        assert fields == (A_CNXN, 0x01000001, 4096, 6, checksum(b"host::"), A_CNXN ^ 0xFFFFFFFF)
        assert raw[HEADER_BYTES:] == b"host::"
        assert raw[:4] == b"CNXN"

    def test_checksum_can_be_skipped(self) -> None:
        """From A_VERSION_SKIP_CHECKSUM on the data_check field is sent as 0."""
        raw = Packet(A_WRTE, 1, 2, b"abc").encode(with_checksum=False)
        assert struct.unpack("<6I", raw[:HEADER_BYTES])[4] == 0

    def test_bad_magic_is_rejected(self) -> None:
        """A header whose magic is not command ^ 0xffffffff is a protocol error."""
        header = struct.pack("<6I", A_OKAY, 1, 2, 0, 0, 0)
        with pytest.raises(ProtocolError):
            decode_header(header, 4096)

    def test_oversize_payload_is_rejected(self) -> None:
        """A payload larger than the limit is a protocol error."""
        header = Packet(A_WRTE, 1, 2, b"x" * 5000).encode()[:HEADER_BYTES]
        with pytest.raises(ProtocolError):
            decode_header(header, 4096)

    def test_read_packet_round_trip_and_checksum(self) -> None:
        """read_packet returns what encode wrote and, if asked, rejects a wrong checksum."""

        async def scenario() -> None:
            reader = asyncio.StreamReader()
            reader.feed_data(Packet(A_WRTE, 7, 9, b"hello").encode())
            assert await read_packet(reader, 4096, verify_checksum=True) == Packet(
                A_WRTE, 7, 9, b"hello"
            )
            bad = bytearray(Packet(A_WRTE, 7, 9, b"hello").encode())
            bad[16] ^= 1
            reader.feed_data(bytes(bad))
            with pytest.raises(ProtocolError):
                await read_packet(reader, 4096, verify_checksum=True)

        asyncio.run(scenario())


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    """One RSA key for the auth tests (generating one takes a while)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class TestAuth:
    def test_public_key_round_trip(self, key: rsa.RSAPrivateKey) -> None:
        """encode_public_key writes adbkey.pub's 524-byte struct and parse_public_key reads it
        back."""
        line = encode_public_key(key.public_key(), "me@host")
        assert line.endswith(" me@host")
        assert parse_public_key(line).public_numbers() == key.public_key().public_numbers()

    def test_signature_verifies_only_with_its_key(self, key: rsa.RSAPrivateKey) -> None:
        """A token signed as the adb host signs it verifies with that key and not another."""
        token = bytes(range(20))
        signature = sign_token(key, token)
        assert verify_token(key.public_key(), token, signature)
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        assert not verify_token(other.public_key(), token, signature)
        assert not verify_token(key.public_key(), bytes(20), signature)

    def test_authorized_keys(self, key: rsa.RSAPrivateKey) -> None:
        """AuthorizedKeys accepts signatures by added keys until cleared."""
        keys = AuthorizedKeys()
        line = encode_public_key(key.public_key())
        token = b"t" * 20
        assert not keys.verify(token, sign_token(key, token))
        keys.add(line)
        assert line in keys
        assert keys.verify(token, sign_token(key, token))
        keys.clear()
        assert line not in keys

    def test_garbage_key_is_rejected(self) -> None:
        """A line that is not an adb key raises KeyFormatError."""
        with pytest.raises(KeyFormatError):
            parse_public_key("bm90IGEga2V5 x@y")


class TestShellService:
    @pytest.mark.parametrize(
        ("args", "command", "pty", "v2"),
        [
            (":ls -l", "ls -l", False, False),
            (":", "", True, False),
            (",v2,TERM=xterm-256color,raw:id", "id", False, True),
            (",v2,TERM=xterm,pty:", "", True, True),
            (",raw:", "", False, False),
        ],
    )
    def test_parse(self, args: str, command: str, pty: bool, v2: bool) -> None:
        """Service arguments choose pty/raw and the protocol as adbd's ShellService does."""
        request = parse_shell_service(args)
        assert request is not None
        assert (request.command, request.pty, request.protocol_v2) == (command, pty, v2)

    def test_no_colon_is_refused(self) -> None:
        """A shell service name without ':' is refused."""
        assert parse_shell_service(",v2") is None

    def test_packet_framing(self) -> None:
        """Shell-protocol packets are an id byte, a u32 LE length and the data."""
        assert encode_packet(ID_STDOUT, b"hi") == b"\x01\x02\x00\x00\x00hi"
        assert encode_packet(ID_EXIT, b"\x03") == b"\x03\x01\x00\x00\x00\x03"


class TestReverseReply:
    def _net_and_transport(self) -> tuple[Net, SimpleNamespace]:
        async def refuse(_spec: str):  # never called: no connection is opened here
            raise ConnectionRefusedError

        return Net("usb-only", refuse), SimpleNamespace(name="host-17", reverse_host_specs=set())

    def test_forward_list_kill(self) -> None:
        """forward answers OKAY, list-forward a length-prefixed table, killforward OKAY."""
        net, transport = self._net_and_transport()
        assert reverse_reply("forward:tcp:9190;tcp:9000", net, transport) == b"OKAY"
        assert transport.reverse_host_specs == {"tcp:9000"}
        assert reverse_reply("list-forward", net, transport) == protocol_string(
            "host-17 tcp:9190 tcp:9000\n"
        )
        assert reverse_reply("killforward:tcp:9190", net, transport) == b"OKAY"
        assert reverse_reply("list-forward", net, transport) == b"0000"

    def test_failures_carry_adbd_messages(self) -> None:
        """norebind conflicts, unknown tunnels and malformed requests FAIL with adbd's text."""
        net, transport = self._net_and_transport()
        reverse_reply("forward:tcp:9190;tcp:9000", net, transport)
        assert reverse_reply(
            "forward:norebind:tcp:9190;tcp:9001", net, transport
        ) == b"FAIL" + protocol_string("cannot rebind existing socket")
        assert reverse_reply("killforward:tcp:1", net, transport) == b"FAIL" + protocol_string(
            "listener 'tcp:1' not found"
        )
        assert reverse_reply("forward:tcp:1", net, transport) == b"FAIL" + protocol_string(
            "bad forward: tcp:1"
        )


class _RecordingTransport:
    """Just enough of Transport for a Stream: records what it sends."""

    def __init__(self, max_payload_bytes: int) -> None:
        self.max_payload_bytes = max_payload_bytes
        self.sent: list[Packet] = []

    def send(self, packet: Packet) -> None:
        self.sent.append(packet)

    async def drain(self) -> None:
        return None

    def forget(self, stream: Stream) -> None:
        return None


class TestStreamFlowControl:
    def test_one_wrte_in_flight_until_okay(self) -> None:
        """A stream sends at most max-payload bytes per WRTE and the next only after the host's
        OKAY."""

        async def scenario() -> None:
            transport = _RecordingTransport(max_payload_bytes=4)
            stream = Stream(transport, local_id=5, remote_id=9)  # type: ignore[arg-type]
            stream.write(b"0123456789")
            for _ in range(5):
                await asyncio.sleep(0)
            assert [p.payload for p in transport.sent] == [b"0123"]
            stream.on_okay()
            for _ in range(5):
                await asyncio.sleep(0)
            assert [p.payload for p in transport.sent] == [b"0123", b"4567"]
            stream.on_okay()
            drained = asyncio.ensure_future(stream.drain())
            for _ in range(5):
                await asyncio.sleep(0)
            assert not drained.done()
            stream.on_okay()
            await asyncio.wait_for(drained, 1)
            assert [(p.command, p.arg0, p.arg1) for p in transport.sent] == [(A_WRTE, 5, 9)] * 3

        asyncio.run(scenario())

    def test_inbound_okay_sent_when_consumed(self) -> None:
        """The OKAY for a host WRTE goes out when the service reads the data, not before."""

        async def scenario() -> None:
            transport = _RecordingTransport(max_payload_bytes=4096)
            stream = Stream(transport, local_id=5, remote_id=9)  # type: ignore[arg-type]
            stream.on_write(b"abc")
            assert transport.sent == []
            assert await stream.read() == b"abc"
            assert transport.sent == [Packet(A_OKAY, 5, 9)]
            stream.on_peer_close()
            assert await stream.read() == b""

        asyncio.run(scenario())
