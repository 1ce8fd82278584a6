"""The user's .npz inputs checked against the model; the outputs kept and written as .npy."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnx
import pytest
from npz_bombs import zeros_npz

from farm.config import JobSettings
from farm.demo_model import write_small_cnn
from farm.errors import SpecError
from farm.jobs.model import ModelInput
from farm.jobs.model_io import npz_members, output_names, outputs_npz, read_inputs, write_outputs
from farm.kinds.input_shapes import DeclaredInput
from farm.kinds.model_inputs import InputsBlob, put_inputs, shapes_of_inputs

T0 = datetime(2026, 1, 1, tzinfo=UTC)

_INPUTS = [ModelInput("x", (1, 3), "float32"), ModelInput("ids", (2,), "int64")]


def _npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def test_every_input_is_read_by_name() -> None:
    """Arrays named as the model's inputs come back by name, unchanged."""
    x, ids = np.ones((1, 3), "float32"), np.arange(2)
    got = read_inputs(_npz(x=x, ids=ids), "in.npz", _INPUTS)
    assert set(got) == {"x", "ids"}
    np.testing.assert_array_equal(got["ids"], ids)


def test_a_missing_input_names_the_file_and_the_input() -> None:
    """Every input must be given."""
    with pytest.raises(SpecError) as info:
        read_inputs(_npz(x=np.ones((1, 3), "float32")), "in.npz", _INPUTS)
    assert info.value.field == "params.inputs"
    assert info.value.reason == "in.npz lacks the model's input ['ids']"


def test_object_arrays_are_refused_unloaded() -> None:
    """A pickled (object) array is never unpickled: the file is refused."""
    with pytest.raises(SpecError, match=r"in.npz is not a numpy .npz archive"):
        read_inputs(_npz(x=np.array([{"a": 1}], dtype=object), ids=np.arange(2)), "in.npz",
                    _INPUTS)


def test_outputs_are_written_as_npy_in_order(tmp_path: Path) -> None:
    """Each output becomes output_<i>.npy holding the same array."""
    outputs = [np.arange(6, dtype="float32").reshape(2, 3), np.array([7], "int64")]
    written = write_outputs(outputs_npz(outputs), tmp_path / "out")
    assert [p.name for p in written] == ["output_0.npy", "output_1.npy"]
    for path, want in zip(written, outputs, strict=True):
        got = np.load(path)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_outputs_are_keyed_and_written_by_the_graphs_names(tmp_path: Path) -> None:
    """The archive keys the outputs by the graph's names; each file is named after its
    output, characters that could leave the folder replaced."""
    outputs = [np.zeros(2, "float32"), np.ones(3, "float32"), np.full(1, 2.0, "float32")]
    names = ["logits", "../boxes", "a/b:0"]
    data = outputs_npz(outputs, names)
    with np.load(io.BytesIO(data)) as archive:
        assert archive.files == names
    written = write_outputs(data, tmp_path / "out")
    assert [p.name for p in written] == ["logits.npy", "_boxes.npy", "a_b_0.npy"]
    assert all(p.parent == tmp_path / "out" for p in written)
    np.testing.assert_array_equal(np.load(written[1]), outputs[1])


def test_output_names_come_from_the_onnx_file(tmp_path: Path) -> None:
    """The small CNN's one output is named as its graph says."""
    path = write_small_cnn(tmp_path / "m.onnx")
    assert output_names(path) == [o.name for o in onnx.load(str(path)).graph.output]
    assert output_names(path) != ["output_0"]


@pytest.fixture(scope="module")
def zeros_2gib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 MB ``.npz`` whose one array ``x`` is 2 GiB of float32 zeros."""
    return zeros_npz(tmp_path_factory.mktemp("npz") / "zeros.npz", "x", (1 << 29,))


class TestBounds:
    """Archives are judged by their headers before any array is inflated."""

    def test_declared_size_over_the_limit_is_refused_unread(self, zeros_2gib: Path) -> None:
        """2 GiB declared in a 2 MB file is refused at the default limit, under 10 MB made."""
        limit = JobSettings().inputs_max_bytes
        tracemalloc.start()
        try:
            with pytest.raises(SpecError) as info:
                put_inputs(_NoStore(), zeros_2gib, "zeros.npz", T0, limit)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert info.value.field == "params.inputs"
        assert info.value.reason == (
            f"zeros.npz: 'x' declares [536870912] float32 (2147483776 bytes); at most {limit} "
            "bytes of inputs are taken ([jobs] inputs_max_bytes)")
        assert peak < 10 * 1024 * 1024

    def test_an_input_of_another_shape_is_refused_before_it_is_read(self, zeros_2gib: Path
                                                                       ) -> None:
        """Against the model, a 2 GiB array where [1, 3] is taken is refused by its header."""
        tracemalloc.start()
        try:
            with pytest.raises(SpecError, match=r"input 'x' has shape \(536870912,\), the "
                                                 r"model takes \(1, 3\)"):
                read_inputs(zeros_2gib.read_bytes(), "zeros.npz", _INPUTS[:1])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 10 * 1024 * 1024

    def test_headers_give_names_shapes_and_dtypes(self) -> None:
        """npz_members reads what np.savez wrote without loading it."""
        members = npz_members(_npz(x=np.ones((1, 3), "float32"), ids=np.arange(2)), "in.npz")
        assert [(m.key, m.shape, str(m.dtype), m.nbytes) for m in members] == [
            ("x", (1, 3), "float32", 12), ("ids", (2,), "int64", 16)]

    def test_a_member_that_is_no_npy_file_is_refused(self) -> None:
        """A zip member np.load would hand back as raw bytes is refused as no .npy."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("x.npy", b"not an array")
        with pytest.raises(SpecError, match=r"^params.inputs: in.npz is not a numpy .npz "):
            npz_members(buffer.getvalue(), "in.npz", max_bytes=1 << 20)


    def test_a_symbolic_input_takes_the_shape_its_header_declares_unread(
            self, zeros_2gib: Path) -> None:
        """--inputs gives x: [n] the array's shape from its .npy header; nothing is inflated."""
        data = zeros_2gib.read_bytes()
        blob = InputsBlob(sha256="0" * 64, name="zeros.npz")
        tracemalloc.start()
        try:
            shapes = shapes_of_inputs([DeclaredInput("x", ("n",))], blob, _OneBlob(data), {})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert shapes == {"x": [1 << 29]}
        assert peak < 10 * 1024 * 1024


class _OneBlob:
    """A blob store holding one archive, whatever its digest."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def get_blob(self, sha256: str) -> bytes:
        return self.data


class _NoStore:
    """A blob store that must never be reached (the archive is refused first)."""

    def put_blob(self, data: bytes | Path, now: datetime) -> str:
        raise AssertionError("stored an archive that should have been refused")


class TestDamagedArchives:
    """Archives zipfile cannot read are one SpecError naming the file, never another error."""

    @staticmethod
    def _one_member() -> bytearray:
        """An .npz of x: float32[1, 3], deflated, as bytes to damage."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive, archive.open(
                "x.npy", "w") as member:
            np.save(member, np.ones((1, 3), "float32"))
        return bytearray(buffer.getvalue())

    def test_an_encrypted_member(self) -> None:
        """A member flagged encrypted (zipfile asks for a password: RuntimeError)."""
        data = self._one_member()
        data[6] |= 1  # general purpose flag bit 0: encrypted, local header
        data[data.rindex(b"PK\x01\x02") + 8] |= 1  # and in the central directory
        with pytest.raises(SpecError, match=r"^params.inputs: in.npz is not a numpy .npz "):
            npz_members(bytes(data), "in.npz", max_bytes=1 << 20)

    def test_a_corrupt_deflate_stream(self) -> None:
        """Garbage where the compressed header should be (zlib.error)."""
        data = self._one_member()
        start = 30 + len("x.npy")
        data[start:start + 8] = b"\xff" * 8
        with pytest.raises(SpecError, match=r"^params.inputs: in.npz is not a numpy .npz "):
            npz_members(bytes(data), "in.npz", max_bytes=1 << 20)

    def test_many_small_arrays_over_the_limit_together(self) -> None:
        """Each array within the limit, all of them past it: refused with their total."""
        data = _npz(a=np.zeros(100, "float32"), b=np.zeros(100, "float32"))
        with pytest.raises(SpecError) as info:
            npz_members(data, "in.npz", max_bytes=600)
        assert info.value.reason == ("in.npz: its arrays declare 800 bytes together; at most 600 "
                                     "bytes of inputs are taken ([jobs] inputs_max_bytes)")
