"""The TVM RPC tracker's wire format, for blocking sockets and asyncio streams.

Source: apache/tvm ``python/tvm/rpc/base.py`` (magic numbers, ``TrackerCode``,
``sendjson``/``recvjson``) and ``python/tvm/rpc/tracker.py`` (message framing,
the 1 MiB frame limit). A connection starts with ``RPC_TRACKER_MAGIC`` as a
little-endian int32 in each direction; after that every message is
``[size: int32 LE][size bytes of UTF-8 JSON]`` and the client speaks first.

Why not import ``tvm.rpc.base``: its helpers work on blocking sockets only
(the relay needs asyncio streams), have no deadline (``recvall`` waits
forever), and importing ``tvm`` costs over a second and a few hundred MB in
farmd, which otherwise needs no TVM. ``tests/unit/tvm`` checks these constants
against ``tvm.rpc.base`` so a drift is caught.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import struct
import time
from enum import IntEnum
from typing import Any

RPC_MAGIC = 0xFF271
RPC_TRACKER_MAGIC = 0x2F271
RPC_CODE_SUCCESS = RPC_MAGIC + 0
RPC_CODE_MISMATCH = RPC_MAGIC + 2
MAX_FRAME_BYTES = 1 << 20  # tracker.py MAX_TRACKER_MSG_BYTES

_INT32 = struct.Struct("<i")


class TrackerCode(IntEnum):
    """Message codes of the tracker protocol (``tvm.rpc.base.TrackerCode``)."""

    FAIL = -1
    SUCCESS = 0
    PING = 1
    STOP = 2
    PUT = 3
    REQUEST = 4
    UPDATE_INFO = 5
    SUMMARY = 6
    GET_PENDING_MATCHKEYS = 7


class FrameError(ValueError):
    """A peer sent a frame that is not valid tracker protocol."""


def pack_int32(value: int) -> bytes:
    """Little-endian int32, as every integer on the wire."""
    return _INT32.pack(value)


def encode_frame(message: Any) -> bytes:
    """One JSON message framed as the tracker expects: ``[len: int32][json]``."""
    data = json.dumps(message).encode("utf-8")
    return _INT32.pack(len(data)) + data


def _check_size(size: int) -> None:
    if size <= 0 or size > MAX_FRAME_BYTES:
        raise FrameError(f"frame size {size} outside 1..{MAX_FRAME_BYTES}")


# --- blocking sockets with a deadline ---------------------------------------------


def _timeout_until(deadline: float) -> float | None:
    """Socket timeout for the time left; None (block) for an infinite deadline."""
    if math.isinf(deadline):
        return None
    left_s = deadline - time.monotonic()
    if left_s <= 0:
        raise TimeoutError("no reply within the deadline")
    return left_s


def _recv_exact(sock: socket.socket, n_bytes: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    remaining = n_bytes
    while remaining:
        sock.settimeout(_timeout_until(deadline))
        chunk = sock.recv(min(remaining, 65536))
        if not chunk:
            raise ConnectionResetError("peer closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _send_all(sock: socket.socket, data: bytes, deadline: float) -> None:
    sock.settimeout(_timeout_until(deadline))
    sock.sendall(data)


def open_tracker(host: str, port: int, deadline: float) -> socket.socket:
    """Connect to a tracker and exchange the magic, all before ``deadline``.

    Args:
        host: tracker address.
        port: tracker TCP port.
        deadline: ``time.monotonic()`` value by which the handshake must be done
            (``math.inf``: none).

    Returns:
        A connected socket ready for :func:`call`.

    Raises:
        OSError: refused, reset or timed out (``TimeoutError``).
        FrameError: the peer answered with another magic: not a tracker.
    """
    sock = socket.create_connection((host, port), timeout=_timeout_until(deadline))
    try:
        _send_all(sock, pack_int32(RPC_TRACKER_MAGIC), deadline)
        (magic,) = _INT32.unpack(_recv_exact(sock, 4, deadline))
        if magic != RPC_TRACKER_MAGIC:
            raise FrameError(f"{host}:{port} answered magic {magic:#x}, not a tracker")
    except BaseException:
        sock.close()
        raise
    return sock


def call(sock: socket.socket, message: Any, deadline: float) -> Any:
    """Send one message and return the decoded reply, all before ``deadline``.

    Raises:
        OSError: the connection failed or the deadline passed (``TimeoutError``).
        FrameError: the reply is not a valid frame.
    """
    _send_all(sock, encode_frame(message), deadline)
    (size,) = _INT32.unpack(_recv_exact(sock, 4, deadline))
    _check_size(size)
    return json.loads(_recv_exact(sock, size, deadline).decode("utf-8"))


def recv_int32(sock: socket.socket, deadline: float) -> int:
    """Read one little-endian int32 (a magic or a return code) before ``deadline``.

    Raises:
        OSError: the connection failed or the deadline passed (``TimeoutError``).
    """
    (value,) = _INT32.unpack(_recv_exact(sock, 4, deadline))
    return value


def send_string(sock: socket.socket, text: str, deadline: float) -> None:
    """Send ``[len: int32][UTF-8 text]``, the framing of raw strings such as the RPC key.

    Raises:
        OSError: the connection failed or the deadline passed (``TimeoutError``).
    """
    data = text.encode("utf-8")
    _send_all(sock, _INT32.pack(len(data)) + data, deadline)


def recv_string(sock: socket.socket, deadline: float) -> str:
    """Read one ``[len: int32][UTF-8 text]`` string (0..MAX_FRAME_BYTES bytes, not JSON).

    Raises:
        OSError: the connection failed or the deadline passed (``TimeoutError``).
        FrameError: the length is negative or over ``MAX_FRAME_BYTES``.
        UnicodeDecodeError: the bytes are not UTF-8.
    """
    size = recv_int32(sock, deadline)
    if not 0 <= size <= MAX_FRAME_BYTES:
        raise FrameError(f"string of {size} bytes outside 0..{MAX_FRAME_BYTES}")
    return _recv_exact(sock, size, deadline).decode("utf-8")


# --- asyncio streams ------------------------------------------------------------


async def read_frame(reader: asyncio.StreamReader) -> Any:
    """Read one framed JSON message.

    Raises:
        asyncio.IncompleteReadError: the stream ended (cleanly between frames if
            ``partial`` is empty).
        FrameError: bad size or bad JSON.
    """
    (size,) = _INT32.unpack(await reader.readexactly(4))
    _check_size(size)
    data = await reader.readexactly(size)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"frame is not JSON: {exc}") from exc
