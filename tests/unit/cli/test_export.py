"""Models stored as blobs at enqueue, ``enqueue model --tuned``, ``farmctl export``'s refusals.

Through click's CliRunner against a real SQLite queue in tmp_path; the tuning
jobs are made without farmd (``tests/tuned_jobs.py``). Nothing here compiles.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import Result
from tuned_jobs import NOW, model_tune_job

from farm.demo_model import write_small_cnn
from farm.errors import SpecError
from farm.jobs.model_store import MODELS_DIR, store_model
from farm.queue import Store
from farm.queue.models import Blob

HOST = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "num-cores": 2}
OPENCL = {"kind": "opencl", "host": HOST}


@pytest.fixture
def data_dir(config: Path) -> Path:
    """The data folder of the test config."""
    return config.parent / "data"


@pytest.fixture
def url(data_dir: Path) -> str:
    """The queue's database URL."""
    return f"sqlite:///{data_dir / 'farm.db'}"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """The small CNN, as the user's file."""
    return write_small_cnn(tmp_path / "small_cnn.onnx")


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A work folder's two database files (content is not read here)."""
    folder = tmp_path / "db"
    folder.mkdir()
    (folder / "database_workload.json").write_text("[1]\n")
    (folder / "database_tuning_record.json").write_text("[0, []]\n")
    return folder


class TestModelStore:
    def test_enqueue_stores_the_model_once_per_content(
        self, farmctl: Callable[..., Result], store: Store, model: Path, data_dir: Path
    ) -> None:
        """Two enqueues of one file make one blob; the spec names it by digest, not a path."""
        assert farmctl("enqueue", "model", "--model", str(model)).exit_code == 0
        copy = model.with_name("renamed.onnx")
        copy.write_bytes(model.read_bytes())
        assert farmctl("enqueue", "model", "--model", str(copy)).exit_code == 0
        first, second = (store.get_job(i).spec["params"] for i in (1, 2))  # type: ignore[union-attr]
        assert first["sha256"] == second["sha256"] == hashlib.sha256(
            model.read_bytes()).hexdigest()
        assert first["path"] is None and second["path"] is None  # no host's file
        assert (first["name"], second["name"]) == ("small_cnn.onnx", "renamed.onnx")
        model.unlink()  # the job no longer depends on the user's file
        assert store.get_blob(first["sha256"]) == copy.read_bytes()
        with store._tx() as session:  # counting rows
            assert session.scalar(sa.select(sa.func.count()).select_from(Blob)) == 1
        assert not (data_dir / MODELS_DIR).exists()  # the cache fills when a job runs

    def test_a_tune_of_a_model_stores_it_too(
        self, farmctl: Callable[..., Result], store: Store, model: Path
    ) -> None:
        """enqueue tune --model names the blob and the file's name (Kind.input_files)."""
        result = farmctl("enqueue", "tune", "--model", str(model), "--trials", "4")
        assert result.exit_code == 0, result.output
        tuned = store.get_job(1).spec["params"]["model"]  # type: ignore[union-attr]
        assert (tuned["name"], tuned["path"]) == ("small_cnn.onnx", None)
        assert store.blob_exists(tuned["sha256"])
        bad = model.with_name("bad.onnx")
        bad.write_bytes(b"junk")
        result = farmctl("enqueue", "tune", "--model", str(bad))
        assert result.exit_code == 2
        assert result.stderr.startswith("Error: --model: not an ONNX model: bad.onnx")

    def test_a_file_that_is_not_onnx_is_refused_naming_the_field(
        self, tmp_path: Path, store: Store
    ) -> None:
        """store_model refuses a non-ONNX file with a SpecError on the field; nothing stored."""
        bad = tmp_path / "bad.onnx"
        bad.write_bytes(b"\x00not a protobuf\xff" * 8)
        with pytest.raises(SpecError, match=r"not an ONNX model: bad\.onnx") as info:
            store_model(bad, store, NOW, "params.model.path")
        assert info.value.field == "params.model.path"
        assert not store.blob_exists(hashlib.sha256(bad.read_bytes()).hexdigest())

    def test_export_materialises_the_model(
        self, farmctl: Callable[..., Result], store: Store, url: str, data_dir: Path,
        model: Path, database: Path,
    ) -> None:
        """FinishedTune.model_file writes the blob into this host's cache, 0600, digest checked."""
        from farm.kinds.tuned import finished_tune

        tune = finished_tune(store, data_dir, model_tune_job(store, url, data_dir, model,
                                                             database, HOST))
        path = tune.model_file(store, data_dir)
        assert path == data_dir / MODELS_DIR / f"{tune.model_sha256}.onnx"
        assert path.read_bytes() == model.read_bytes()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert tune.model_name == "small_cnn.onnx"


class TestTunedFlag:
    def test_a_finished_tune_of_the_same_model_is_accepted(
        self, farmctl: Callable[..., Result], store: Store, url: str, data_dir: Path,
        model: Path, database: Path,
    ) -> None:
        """--tuned with a succeeded tune of this model and target is queued with it."""
        tune = model_tune_job(store, url, data_dir, model, database, HOST)
        result = farmctl("enqueue", "model", "--model", str(model), "--tuned", str(tune))
        assert result.exit_code == 0, result.output
        assert store.get_job(tune + 1).spec["params"]["tuned"] == tune  # type: ignore[union-attr]

    def test_it_prefers_the_phones_the_tune_ran_on(
        self, farmctl: Callable[..., Result], store: Store, url: str, data_dir: Path,
        model: Path, database: Path,
    ) -> None:
        """--tuned N prefers tune job N's phone (no limit); --serial and --each pin, kept."""
        tune = model_tune_job(store, url, data_dir, model, database, HOST)
        assert farmctl("enqueue", "model", "--model", str(model), "--tuned",
                       str(tune)).exit_code == 0
        devices = store.get_job(tune + 1).spec["devices"]  # type: ignore[union-attr]
        assert (devices["prefer_serials"], devices["serials"]) == (["R1"], None)
        pinned = farmctl("enqueue", "model", "--model", str(model), "--tuned", str(tune),
                         "--serial", "R1")
        assert pinned.exit_code == 0, pinned.output
        devices = store.get_job(tune + 2).spec["devices"]  # type: ignore[union-attr]
        assert (devices["prefer_serials"], devices["serials"]) == (None, ["R1"])
        each = farmctl("enqueue", "model", "--model", str(model), "--tuned", str(tune), "--each")
        assert each.exit_code == 0, each.output
        devices = store.get_job(tune + 3).spec["devices"]  # type: ignore[union-attr]
        assert (devices["prefer_serials"], devices["serials"]) == (None, ["R1"])

    @pytest.mark.parametrize(
        ("setup", "message"),
        [
            ("queued", "--tuned: tune job 1 has not finished well: it is queued"),
            ("gemm", "--tuned: job 1 is a gemm job, not a tune of a model"),
            ("other_model", "--tuned: tune job 1 tuned another model"),
            ("opencl", "--tuned: tune job 1 tuned for opencl, not --target cpu"),
            ("shapes", "--input-shape: tune job 1 tuned input shapes of the model; give the same"),
        ],
    )
    def test_a_tune_that_does_not_fit_is_refused(
        self, farmctl: Callable[..., Result], store: Store, url: str, data_dir: Path,
        model: Path, database: Path, tmp_path: Path, setup: str, message: str,
    ) -> None:
        """Each misfit is one line naming --tuned, exit 2, nothing queued."""
        if setup == "gemm":
            store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        else:
            tuned_model = write_small_cnn(tmp_path / "other.onnx", seed=8) \
                if setup == "other_model" else model
            model_tune_job(store, url, data_dir, tuned_model, database,
                           OPENCL if setup == "opencl" else HOST, finish=setup != "queued")
        shapes = ["--input-shape", "x=1,3,16,16"] if setup == "shapes" else []
        result = farmctl("enqueue", "model", "--model", str(model), "--tuned", "1", *shapes)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"Error: {message}"), result.stderr
        assert result.stderr.count("\n") == 1
        assert len(store.list_jobs()) == 1


class TestExportRefusals:
    def test_unknown_job(self, farmctl: Callable[..., Result], tmp_path: Path) -> None:
        """A job id that does not exist is one line, exit 2."""
        result = farmctl("export", "9", "--out", str(tmp_path / "b"))
        assert (result.exit_code, result.stderr) == (2, "Error: JOB_ID: no job 9\n")

    def test_not_a_tune_job(
        self, farmctl: Callable[..., Result], store: Store, tmp_path: Path
    ) -> None:
        """A gemm job has nothing to export."""
        store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        result = farmctl("export", "1", "--out", str(tmp_path / "b"))
        assert result.exit_code == 2
        assert result.stderr == "Error: JOB_ID: job 1 is a gemm job, not a tune of a model\n"

    def test_not_finished(
        self, farmctl: Callable[..., Result], store: Store, url: str, data_dir: Path,
        model: Path, database: Path, tmp_path: Path,
    ) -> None:
        """A tune still queued is refused with its state."""
        model_tune_job(store, url, data_dir, model, database, HOST, finish=False)
        result = farmctl("export", "1", "--out", str(tmp_path / "b"))
        assert result.exit_code == 2
        assert "has not finished well: it is queued" in result.stderr

    def test_out_not_empty(
        self, farmctl: Callable[..., Result], store: Store, url: str, data_dir: Path,
        model: Path, database: Path, tmp_path: Path,
    ) -> None:
        """An --out folder with files in it is left alone."""
        model_tune_job(store, url, data_dir, model, database, HOST)
        out = tmp_path / "b"
        out.mkdir()
        (out / "keep.txt").write_text("mine")
        result = farmctl("export", "1", "--out", str(out))
        assert result.exit_code == 2
        assert result.stderr == f"Error: --out: {out} exists and is not an empty folder\n"
        assert [p.name for p in out.iterdir()] == ["keep.txt"]
