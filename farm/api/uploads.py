"""Model uploads spooled to disk, bounded in size and in how many run at once per token.

``POST /api/v1/blobs`` used to gather the body in memory and copy it again
(200 MB of zeros raised farmd's RSS by 390 MB and kept most of it, issue 26).
Now the body goes chunk by chunk (the server's own chunks, 64 KiB with uvicorn)
into a private file under ``<data_dir>/uploads``, hashed as it arrives, and is
refused with 413 as soon as it passes ``[api] upload_max_bytes``. Only then is
it checked as ONNX, from the file (:func:`farm.jobs.model_store.check_onnx_file`),
and read whole only to be stored once it is a valid model.

Each token runs at most ``[api] uploads_per_token`` uploads at once
(:class:`UploadSlots`); a further one waits for a slot before its body is read,
so the kernel's socket buffers, not farmd, hold what its client sends meanwhile.
A slot's holder cannot keep it by stalling: a client that sends nothing for
``[api] upload_read_timeout_s`` is cut off with 408, freeing its slot (three
uploads that declared a megabyte and sent ten bytes used to block their
token's next upload for good). Waiting uploads are never read, so no read
timeout applies to them while they wait.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from farm.api.errors import Stalled, TooLarge
from farm.privacy import private_dir

__all__ = ["UPLOADS_DIR", "Spooled", "UploadSlots", "spool"]

#: Where uploads are spooled, under the data folder (removed once checked and stored).
UPLOADS_DIR = "uploads"


@dataclass(frozen=True)
class Spooled:
    """An upload written to disk.

    Attributes:
        path: the private file holding the bytes (the caller removes it).
        sha256: hex SHA-256 of the bytes.
        size: bytes received.
    """

    path: Path
    sha256: str
    size: int


async def spool(chunks: AsyncIterator[bytes], data_dir: Path, limit_bytes: int,
                read_timeout_s: float) -> Spooled:
    """Write ``chunks`` to a private file under ``<data_dir>/uploads``, hashing as they come.

    Args:
        chunks: the request body's chunks (``Request.stream()``).
        data_dir: farm's data folder.
        limit_bytes: the most bytes taken.
        read_timeout_s: the longest wait for the next chunk.

    Returns:
        The spooled file; it is removed when this raises.

    Raises:
        TooLarge: more than ``limit_bytes`` arrived (the rest is not read).
        Stalled: no chunk came for ``read_timeout_s`` (the rest is not read).
        OSError: the file could not be written.
    """
    folder = private_dir(Path(data_dir) / UPLOADS_DIR)
    fd, name = tempfile.mkstemp(prefix="upload-", suffix=".part", dir=folder)
    os.close(fd)
    path = Path(name)
    digest = hashlib.sha256()
    size = 0
    try:
        async with await anyio.open_file(path, "wb") as handle:
            async for chunk in _paced(chunks, read_timeout_s):
                size += len(chunk)
                if size > limit_bytes:
                    raise TooLarge(f"the upload is over {limit_bytes} bytes "
                                   "([api] upload_max_bytes)")
                digest.update(chunk)
                await handle.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return Spooled(path, digest.hexdigest(), size)


async def _paced(chunks: AsyncIterator[bytes], read_timeout_s: float) -> AsyncIterator[bytes]:
    """``chunks``, each awaited at most ``read_timeout_s``.

    Raises:
        Stalled: the next chunk did not come in time.
    """
    iterator = aiter(chunks)
    while True:
        try:
            with anyio.fail_after(read_timeout_s):
                chunk = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise Stalled(f"the upload sent nothing for {read_timeout_s:g} s "
                          "([api] upload_read_timeout_s)") from None
        yield chunk


class UploadSlots:
    """At most ``per_token`` uploads at once for each token; more wait their turn.

    Lives on the app (one event loop), so plain :class:`asyncio.Semaphore` s do.

    Args:
        per_token: uploads one token may run at once (``[api] uploads_per_token``).
    """

    def __init__(self, per_token: int) -> None:
        self.per_token = per_token
        self._slots: dict[int, asyncio.Semaphore] = {}

    @asynccontextmanager
    async def slot(self, token_id: int) -> AsyncIterator[None]:
        """Hold one of ``token_id``'s slots for the block (waits while all are taken)."""
        semaphore = self._slots.setdefault(token_id, asyncio.Semaphore(self.per_token))
        async with semaphore:
            yield
