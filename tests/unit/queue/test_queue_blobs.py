"""Blobs: job inputs stored once by SHA-256, read back checked; the model cache per host.

On SQLite and, with ``TEST_POSTGRES_URL``, PostgreSQL (the ``store`` fixture).
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from farm.errors import SpecError, StoreError
from farm.jobs.model_store import MODELS_DIR, materialise, spec_with_blob, store_spec_models
from farm.queue import Store
from farm.queue.models import Blob

NOW = datetime(2025, 1, 1, tzinfo=UTC)
DATA = b"\x08\x07model bytes\x00\xff" * 100


def _count(store: Store) -> int:
    with store._tx() as session:  # counting rows
        return int(session.scalar(sa.select(sa.func.count()).select_from(Blob)) or 0)


class TestBlobOps:
    """put_blob, get_blob and blob_exists on the real store."""

    def test_put_returns_the_digest_and_get_returns_the_bytes(self, store: Store) -> None:
        """A blob is named by the SHA-256 of its bytes and read back whole."""
        sha256 = store.put_blob(DATA, NOW)
        assert sha256 == hashlib.sha256(DATA).hexdigest()
        assert store.get_blob(sha256) == DATA
        assert store.blob_exists(sha256)

    def test_put_is_idempotent(self, store: Store, tmp_path: Path) -> None:
        """The same bytes put twice, once from a file, are one row."""
        file = tmp_path / "m.onnx"
        file.write_bytes(DATA)
        assert store.put_blob(DATA, NOW) == store.put_blob(file, NOW)
        assert _count(store) == 1

    def test_missing_blob(self, store: Store) -> None:
        """An unknown digest is None and does not exist."""
        assert store.get_blob("0" * 64) is None
        assert not store.blob_exists("0" * 64)

    def test_damaged_blob_is_a_store_error(self, store: Store) -> None:
        """Bytes that no longer hash to the name are refused, not handed to a compiler."""
        sha256 = store.put_blob(DATA, NOW)
        with store._tx() as session:  # damaging the row on purpose
            session.execute(sa.update(Blob).where(Blob.sha256 == sha256).values(data=b"other"))
        with pytest.raises(StoreError, match="damaged"):
            store.get_blob(sha256)

    def test_racing_puts_of_the_same_bytes_all_succeed(self, store_url: str) -> None:
        """Hosts storing the same model at once: every put returns the digest, one row."""
        stores = [Store(store_url) for _ in range(4)]
        barrier = threading.Barrier(len(stores))
        results: list[str] = []
        errors: list[BaseException] = []

        def put(one: Store) -> None:
            barrier.wait()
            try:
                results.append(one.put_blob(DATA, NOW))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=put, args=(one,)) for one in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        try:
            assert errors == []
            assert results == [hashlib.sha256(DATA).hexdigest()] * len(stores)
            assert _count(stores[0]) == 1
        finally:
            for one in stores:
                one.close()


class TestModelCache:
    """materialise writes a blob into this host's models cache, checked."""

    def test_written_from_the_database(self, store: Store, tmp_path: Path) -> None:
        """A host without the file gets <data_dir>/models/<sha256>.onnx, 0600."""
        sha256 = store.put_blob(DATA, NOW)
        path = materialise(store, sha256, tmp_path / "host-b")
        assert path == tmp_path / "host-b" / MODELS_DIR / f"{sha256}.onnx"
        assert path.read_bytes() == DATA
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600

    def test_a_damaged_cached_copy_is_rewritten(self, store: Store, tmp_path: Path) -> None:
        """A cached file whose digest is wrong is replaced from the blob."""
        sha256 = store.put_blob(DATA, NOW)
        path = materialise(store, sha256, tmp_path)
        path.write_bytes(b"truncated")
        assert materialise(store, sha256, tmp_path).read_bytes() == DATA

    def test_a_good_cached_copy_needs_no_database(self, store: Store, tmp_path: Path) -> None:
        """With the file cached, no store is needed (an old job on its own host)."""
        sha256 = store.put_blob(DATA, NOW)
        materialise(store, sha256, tmp_path)
        assert materialise(None, sha256, tmp_path).read_bytes() == DATA

    def test_unknown_blob_is_a_spec_error(self, store: Store, tmp_path: Path) -> None:
        """A spec naming a model the database lacks fails naming the field."""
        with pytest.raises(SpecError, match="not stored in the database") as info:
            materialise(store, "a" * 64, tmp_path, "params.model.sha256")
        assert info.value.field == "params.model.sha256"


class TestSpecs:
    """Specs name blobs instead of paths."""

    def test_spec_with_blob(self) -> None:
        """The path field gives way to sha256 and name; other fields stay."""
        raw = {"kind": "tune", "params": {"model": {"path": "/u/m.onnx", "target": "cpu"}}}
        out = spec_with_blob(raw, "params.model.path", "b" * 64, "m.onnx")
        assert out["params"]["model"] == {"target": "cpu", "sha256": "b" * 64, "name": "m.onnx"}
        assert raw["params"]["model"]["path"] == "/u/m.onnx"  # the input is not changed

    def test_spec_with_blob_makes_the_holder(self) -> None:
        """An API request without a model object gets one."""
        out = spec_with_blob({"kind": "model"}, "params.path", "c" * 64, "x.onnx")
        assert out == {"kind": "model", "params": {"sha256": "c" * 64, "name": "x.onnx"}}

    def test_store_spec_models_leaves_other_fields(self, store: Store) -> None:
        """A field that is absent or not a string is left for the spec's validation."""
        raw = {"kind": "model", "params": {"path": 3}}
        assert store_spec_models(raw, ("params.path", "params.model.path"), store, NOW) == raw
        assert _count(store) == 0
