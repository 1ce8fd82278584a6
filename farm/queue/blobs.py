"""The blob half of :class:`farm.queue.store.Store`: job inputs by the SHA-256 of their bytes.

A job's model file is stored here at enqueue, so any host sharing the database
can run the job (:mod:`farm.jobs.model_store` materialises it into that host's
cache). A blob is named by its content and never changed: putting the same
bytes twice stores them once, and two hosts putting them at once both succeed
(``INSERT ... ON CONFLICT DO NOTHING`` on PostgreSQL and SQLite).

Blobs are kept: retention (:mod:`farm.retention`) does not delete them, so a
queued job, a retry, or a later ``enqueue model --tuned`` always finds its model.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from farm.errors import StoreError
from farm.queue.models import Blob
from farm.queue.ops import TransactionOps

__all__ = ["SHA256_PATTERN", "BlobOps", "blob_digest"]

#: A blob's name: the lower-case hex SHA-256 of its bytes.
SHA256_PATTERN = re.compile(r"^[0-9a-f]{64}$")


def blob_digest(data: bytes) -> str:
    """The name a blob of ``data`` gets: its hex SHA-256."""
    return hashlib.sha256(data).hexdigest()


class BlobOps(TransactionOps):
    """Blob operations; mixed into Store, which provides ``_tx()``."""

    def put_blob(self, data: bytes | Path, now: datetime) -> str:
        """Store ``data`` once by its SHA-256; idempotent and safe to race.

        Args:
            data: the bytes, or a file whose bytes are read.
            now: the time recorded if the blob is new.

        Returns:
            The hex SHA-256 of the bytes.

        Raises:
            OSError: ``data`` is a file that cannot be read.
            StoreError: the database refused the write.
        """
        payload = data.read_bytes() if isinstance(data, Path) else bytes(data)
        sha256 = blob_digest(payload)
        with self._tx() as session:
            if session.get(Blob, sha256) is not None:
                return sha256  # stored already: do not send the bytes again
            dialect = session.get_bind().dialect.name
            module = postgresql if dialect == "postgresql" else sqlite
            row = {"sha256": sha256, "size": len(payload), "data": payload, "created_at": now}
            session.execute(module.insert(Blob).values(row).on_conflict_do_nothing(
                index_elements=[Blob.sha256]))
        return sha256

    def get_blob(self, sha256: str) -> bytes | None:
        """The bytes of blob ``sha256``, checked against the name; None if there is none.

        Raises:
            StoreError: the stored bytes do not hash to ``sha256`` (a damaged row),
                or the database cannot be read.
        """
        with self._tx() as session:
            data = session.scalar(select(Blob.data).where(Blob.sha256 == sha256))
        if data is None:
            return None
        if blob_digest(data) != sha256:
            raise StoreError(f"blob {sha256[:12]} is damaged: its bytes hash to "
                             f"{blob_digest(data)[:12]}")
        return bytes(data)

    def blob_exists(self, sha256: str) -> bool:
        """Whether blob ``sha256`` is stored (its bytes are not read)."""
        with self._tx() as session:
            return session.scalar(select(Blob.size).where(Blob.sha256 == sha256)) is not None
