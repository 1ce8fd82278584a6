"""Tests for farm.tvm.protocol: the tracker wire format."""

from __future__ import annotations

import asyncio
import math
import socket
import threading
import time

import pytest

from farm.tvm import protocol


class TestConstants:
    def test_match_tvm(self) -> None:
        """Magic numbers and codes equal the installed TVM's, so a drift is caught."""
        from tvm.rpc import base

        assert protocol.RPC_MAGIC == base.RPC_MAGIC
        assert protocol.RPC_TRACKER_MAGIC == base.RPC_TRACKER_MAGIC
        assert protocol.RPC_CODE_MISMATCH == base.RPC_CODE_MISMATCH
        for code in protocol.TrackerCode:
            assert getattr(base.TrackerCode, code.name) == code.value


class TestFrames:
    def test_encode_then_read(self) -> None:
        """A framed message reads back equal."""

        async def body() -> object:
            reader = asyncio.StreamReader()
            reader.feed_data(protocol.encode_frame([3, "android", [5001, "k"], None]))
            reader.feed_eof()
            return await protocol.read_frame(reader)

        assert asyncio.run(body()) == [3, "android", [5001, "k"], None]

    @pytest.mark.parametrize("size", [0, -1, protocol.MAX_FRAME_BYTES + 1])
    def test_bad_size_is_refused(self, size: int) -> None:
        """Sizes outside 1..1 MiB raise FrameError instead of allocating."""

        async def body() -> None:
            reader = asyncio.StreamReader()
            reader.feed_data(protocol.pack_int32(size))
            reader.feed_eof()
            await protocol.read_frame(reader)

        with pytest.raises(protocol.FrameError):
            asyncio.run(body())


class TestBlockingCalls:
    def test_silent_peer_times_out_at_deadline(self) -> None:
        """open_tracker gives up at its deadline when the peer never answers."""
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                protocol.open_tracker("127.0.0.1", server.getsockname()[1], started + 0.3)
            assert time.monotonic() - started < 2

    def test_wrong_magic_is_not_a_tracker(self) -> None:
        """A peer answering another magic is refused with FrameError."""

        def fake_server() -> None:
            conn, _ = listener.accept()
            conn.recv(4)
            conn.sendall(protocol.pack_int32(protocol.RPC_MAGIC))
            conn.close()

        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            thread = threading.Thread(target=fake_server)
            thread.start()
            with pytest.raises(protocol.FrameError):
                protocol.open_tracker("127.0.0.1", listener.getsockname()[1], math.inf)
            thread.join()


class TestRawStrings:
    def test_string_round_trip_including_empty(self) -> None:
        """send_string/recv_string carry raw UTF-8 (the RPC key), empty included."""
        left, right = socket.socketpair()
        with left, right:
            for text in ["client:android -timeout=10", ""]:
                protocol.send_string(left, text, math.inf)
                assert protocol.recv_string(right, time.monotonic() + 5) == text
            left.sendall(protocol.pack_int32(protocol.RPC_MAGIC))
            assert protocol.recv_int32(right, time.monotonic() + 5) == protocol.RPC_MAGIC

    def test_oversized_string_is_refused(self) -> None:
        left, right = socket.socketpair()
        with left, right:
            left.sendall(protocol.pack_int32(protocol.MAX_FRAME_BYTES + 1))
            with pytest.raises(protocol.FrameError):
                protocol.recv_string(right, time.monotonic() + 5)
