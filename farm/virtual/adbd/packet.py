"""ADB transport packets: the 24-byte header and its payload.

Layout (AOSP ``adb/protocol.txt``, ``adb/adb.h`` ``struct amessage``), all
fields little-endian u32::

    command   A_CNXN, A_OPEN, ...
    arg0
    arg1
    data_length
    data_check    sum of the payload bytes (not a CRC despite the name);
                  0 is allowed from version A_VERSION_SKIP_CHECKSUM on
    magic         command ^ 0xffffffff

followed by ``data_length`` payload bytes.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

A_SYNC = 0x434E5953
A_CNXN = 0x4E584E43
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_AUTH = 0x48545541
A_STLS = 0x534C5453

# adb/adb.h: A_VERSION_MIN, A_VERSION_SKIP_CHECKSUM (== A_VERSION today).
A_VERSION_MIN = 0x01000000
A_VERSION_SKIP_CHECKSUM = 0x01000001
A_VERSION = 0x01000001

# adb/adb.h: MAX_PAYLOAD (1 MiB) and MAX_PAYLOAD_V1 (4 KiB, the limit for CNXN
# and AUTH, sent before the peer's limit is known).
MAX_PAYLOAD_BYTES = 1024 * 1024
MAX_PAYLOAD_V1_BYTES = 4096

# AUTH arg0 values (adb/adb_auth.h).
AUTH_TOKEN = 1
AUTH_SIGNATURE = 2
AUTH_RSAPUBLICKEY = 3

HEADER = struct.Struct("<6I")
HEADER_BYTES = HEADER.size  # 24

_NAMES = {
    A_SYNC: "SYNC",
    A_CNXN: "CNXN",
    A_OPEN: "OPEN",
    A_OKAY: "OKAY",
    A_CLSE: "CLSE",
    A_WRTE: "WRTE",
    A_AUTH: "AUTH",
    A_STLS: "STLS",
}


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid ADB packet; the transport must close.

    Not a FarmError: it never leaves the virtual phone's transport.
    """


@dataclass(frozen=True)
class Packet:
    """One ADB packet.

    Attributes:
        command: one of the ``A_*`` constants.
        arg0: first argument (meaning depends on the command).
        arg1: second argument.
        payload: the data, at most the negotiated max payload in bytes.
    """

    command: int
    arg0: int
    arg1: int
    payload: bytes = b""

    @property
    def name(self) -> str:
        """Four-letter command name, e.g. ``"WRTE"``, or its hex value if unknown."""
        return _NAMES.get(self.command, f"{self.command:#010x}")

    def encode(self, *, with_checksum: bool = True) -> bytes:
        """Header plus payload as sent on the wire.

        Args:
            with_checksum: fill ``data_check``; adbd leaves it 0 once the peer's
                version is at least ``A_VERSION_SKIP_CHECKSUM``.
        """
        check = checksum(self.payload) if with_checksum else 0
        header = HEADER.pack(
            self.command,
            self.arg0,
            self.arg1,
            len(self.payload),
            check,
            self.command ^ 0xFFFFFFFF,
        )
        return header + self.payload


def checksum(payload: bytes) -> int:
    """The ``data_check`` field: the byte sum of ``payload`` modulo 2**32."""
    return sum(payload) & 0xFFFFFFFF


def decode_header(header: bytes, max_payload_bytes: int) -> tuple[int, int, int, int, int]:
    """Validate a 24-byte header.

    Returns:
        (command, arg0, arg1, data_length, data_check).

    Raises:
        ProtocolError: wrong size, bad magic, or a payload over ``max_payload_bytes``.
    """
    if len(header) != HEADER_BYTES:
        raise ProtocolError(f"short header: {len(header)} bytes")
    command, arg0, arg1, length, check, magic = HEADER.unpack(header)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic {magic:#010x} for command {command:#010x}")
    if length > max_payload_bytes:
        raise ProtocolError(f"payload of {length} bytes exceeds {max_payload_bytes}")
    return command, arg0, arg1, length, check


async def read_packet(
    reader: asyncio.StreamReader, max_payload_bytes: int, *, verify_checksum: bool
) -> Packet:
    """Read one packet.

    Args:
        reader: the transport's byte stream.
        max_payload_bytes: the largest payload accepted.
        verify_checksum: check ``data_check`` (peers before A_VERSION_SKIP_CHECKSUM).

    Raises:
        asyncio.IncompleteReadError: the peer closed the connection.
        ProtocolError: the packet is malformed.
    """
    header = await reader.readexactly(HEADER_BYTES)
    command, arg0, arg1, length, check = decode_header(header, max_payload_bytes)
    payload = await reader.readexactly(length) if length else b""
    if verify_checksum and check != checksum(payload):
        raise ProtocolError(f"bad checksum on {_NAMES.get(command, hex(command))}")
    return Packet(command, arg0, arg1, payload)
