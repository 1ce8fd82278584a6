"""The user's .npz inputs checked against the model; the outputs kept and written as .npy."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
import pytest

from farm.demo_model import write_small_cnn
from farm.errors import SpecError
from farm.jobs.model import ModelInput
from farm.jobs.model_io import output_names, outputs_npz, read_inputs, write_outputs

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
