"""Small ``.npz`` archives that declare huge arrays, for tests of the bounds on inputs.

:func:`zeros_npz` writes a real, valid archive (CRC and sizes right) of one
array of zeros without ever holding or compressing the whole of it: deflate
output after a full flush does not depend on what came before, so one
compressed MiB of zeros is repeated. 2 GiB of float32 zeros is a 2 MB file
that ``np.load`` would inflate whole.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

__all__ = ["zeros_npz"]

_MIB = 1 << 20


def zeros_npz(path: Path, key: str, shape: tuple[int, ...], dtype: str = "float32") -> Path:
    """Write ``path``: an ``.npz`` holding ``key``, an array of zeros of ``shape`` and ``dtype``.

    The data's size must be a whole number of MiB (e.g. ``(2**29,)`` float32: 2 GiB).
    """
    descr = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=object)) * descr.itemsize
    assert nbytes % _MIB == 0, "zeros_npz writes whole MiB of data"
    header = npy_format.header_data_from_array_1_0(np.zeros((0,), descr))
    header["shape"] = shape
    head = _npy_header(header)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(bytes(_MIB)) + deflate.flush(zlib.Z_FULL_FLUSH)
    last = deflate.flush()
    crc = zlib.crc32(head)
    zeros = bytes(_MIB)
    for _ in range(nbytes // _MIB):
        crc = zlib.crc32(zeros, crc)
    name = f"{key}.npy".encode()
    size = len(head) + nbytes
    compressed = len(first) + len(block) * (nbytes // _MIB) + len(last)
    fields = (20, 0, 8, 0, 0x21, crc, compressed, size, len(name))
    with path.open("wb") as out:
        out.write(struct.pack("<4s5H3L2H", b"PK\x03\x04", *fields, 0) + name)
        out.write(first)
        for _ in range(nbytes // _MIB):
            out.write(block)
        out.write(last)
        directory_at = out.tell()
        directory = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, *fields, 0, 0, 0, 0, 0,
                                0) + name
        out.write(directory)
        out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(directory),
                              directory_at, 0))
    return path


def _npy_header(header: dict[str, object]) -> bytes:
    """The ``.npy`` magic and header (format 1.0) for ``header``, as ``np.save`` writes them."""
    import io

    buffer = io.BytesIO()
    npy_format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()
