"""``--input-shape`` checked against the model at enqueue: one line naming the input.

Through click's CliRunner (``farmctl enqueue model|tune``) against a real SQLite
queue; the HTTP API's submit path runs the same check (tests/unit/api).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import onnx
import pytest
from exported_models import write_computed_reshape
from onnx import TensorProto, helper

from farm.queue import Store

#: What each refusal must say (after ``Error: --input-shape: ``).
REFUSALS = [
    (["--input-shape", "image=1,3,8,8"],
     "m.onnx has no input 'image'; its inputs: 'images' [batch,3,8,8]"),
    (["--input-shape", "images=3,8,8"],
     "input 'images' has rank 4 in m.onnx ([batch,3,8,8]); 3 dims given"),
    (["--input-shape", "images=1,4,8,8"],
     "input 'images' has dimension 1 = 3 in m.onnx ([batch,3,8,8]); 4 given"),
    ([], ("input 'images' has symbolic dimension 'batch' in m.onnx ([batch,3,8,8]); "
          "give its shape, e.g. images=1,3,8,8")),
]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A model whose one input is ``images: [batch, 3, 8, 8]``."""
    return write_computed_reshape(tmp_path / "m.onnx")


@pytest.mark.parametrize("kind", ["model", "tune"])
@pytest.mark.parametrize(("flags", "message"), REFUSALS)
def test_wrong_shapes_are_refused_in_one_line(farmctl, store: Store, model: Path, kind: str,
                                              flags: list[str], message: str) -> None:
    """A wrong name, rank, fixed size or an unset symbolic dimension: exit 2, one line, no job."""
    result = farmctl("enqueue", kind, "--model", str(model), *flags)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"Error: --input-shape: {message}\n"
    assert store.list_jobs() == []


def test_fitting_shapes_are_queued(farmctl, store: Store, model: Path) -> None:
    """The model's own shape with the batch set is accepted and stored as given."""
    result = farmctl("enqueue", "model", "--model", str(model), "--input-shape", "images=2,3,8,8")
    assert result.exit_code == 0, result.output
    [job] = store.list_jobs()
    assert job.spec["params"]["input_shapes"] == {"images": [2, 3, 8, 8]}


def _npz(path: Path, **arrays: np.ndarray) -> str:
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return str(path)


def test_inputs_give_the_symbolic_shape(farmctl, store: Store, model: Path,
                                        tmp_path: Path) -> None:
    """--inputs on a symbolic batch needs no --input-shape: the arrays' shape is stored."""
    inputs = _npz(tmp_path / "in.npz", images=np.ones((2, 3, 8, 8), "float32"))
    result = farmctl("enqueue", "model", "--model", str(model), "--inputs", inputs)
    assert result.exit_code == 0, result.output
    [job] = store.list_jobs()
    assert job.spec["params"]["input_shapes"] == {"images": [2, 3, 8, 8]}


@pytest.mark.parametrize(("arrays", "message"), [
    ({"image": np.ones((1, 3, 8, 8), "float32")},
     "--inputs: in.npz has ['image'], which the model does not take (its inputs: ['images'])"),
    ({"images": np.ones((1, 3, 8), "float32")},
     "--inputs: input 'images' has rank 4 in m.onnx ([batch,3,8,8]); 3 dims given"),
    ({"images": np.ones((1, 4, 8, 8), "float32")},
     "--inputs: input 'images' has dimension 1 = 3 in m.onnx ([batch,3,8,8]); 4 given"),
])
def test_inputs_that_do_not_fit_are_refused_by_their_name(
        farmctl, store: Store, model: Path, tmp_path: Path, arrays: dict[str, np.ndarray],
        message: str) -> None:
    """A misnamed or misshapen array is refused on --inputs, naming it, not the shape flag."""
    result = farmctl("enqueue", "model", "--model", str(model), "--inputs",
                     _npz(tmp_path / "in.npz", **arrays))
    assert result.exit_code == 2, result.output
    assert result.stderr == f"Error: {message}\n"
    assert store.list_jobs() == []


def test_input_shape_wins_over_the_inputs(farmctl, store: Store, model: Path,
                                          tmp_path: Path) -> None:
    """--input-shape given with --inputs must agree with the arrays (the archive is checked)."""
    inputs = _npz(tmp_path / "in.npz", images=np.ones((2, 3, 8, 8), "float32"))
    result = farmctl("enqueue", "model", "--model", str(model), "--inputs", inputs,
                     "--input-shape", "images=1,3,8,8")
    assert result.exit_code == 2, result.output
    assert result.stderr == ("Error: --inputs: in.npz: input 'images' has shape (2, 3, 8, 8), "
                             "the model takes (1, 3, 8, 8)\n")


def _identity(path: Path, dims: list[int]) -> Path:
    """A model passing ``x: float32[dims]`` through as ``y``."""
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


class TestInputsFitAPhone:
    """Inputs no phone can hold are refused at enqueue, not in an attempt."""

    @pytest.mark.parametrize("kind", ["model", "tune"])
    def test_a_declared_dimension_of_a_trillion_is_refused(self, farmctl, store: Store,
                                                           tmp_path: Path, kind: str) -> None:
        """A model declaring x: [10**12] exits 2 in one line naming the input; no job."""
        model = _identity(tmp_path / "huge.onnx", [10**12])
        result = farmctl("enqueue", kind, "--model", str(model))
        assert result.exit_code == 2, result.output
        assert result.stderr == ("Error: --input-shape: input 'x' of huge.onnx has "
                                 "1000000000000 elements ([1000000000000]); at most 2147483647 "
                                 "fit a phone\n")
        assert store.list_jobs() == []

    def test_two_to_the_31_elements_are_refused(self, farmctl, store: Store, model: Path
                                               ) -> None:
        """--input-shape within each dimension's range but over 2**31-1 elements in all."""
        result = farmctl("enqueue", "model", "--model", str(model),
                         "--input-shape", "images=11184811,3,8,8")
        assert result.exit_code == 2, result.output
        assert result.stderr == ("Error: --input-shape: input 'images' of m.onnx has "
                                 "2147483712 elements ([11184811,3,8,8]); at most 2147483647 "
                                 "fit a phone\n")
        assert store.list_jobs() == []

    def test_inputs_over_the_largest_devices_memory_are_refused(
            self, farmctl, store: Store, model: Path) -> None:
        """1.5 GB of inputs where the farm's phones have at most 1 GB: exit 2, no job."""
        now = datetime(2026, 1, 1, tzinfo=UTC)
        store.upsert_device("SMALL", now, {"abi": "arm64-v8a", "mem_total_kb": 500_000})
        store.upsert_device("BIG", now, {"abi": "arm64-v8a", "mem_total_kb": 1_000_000})
        result = farmctl("enqueue", "model", "--model", str(model),
                         "--input-shape", "images=2000000,3,8,8")
        assert result.exit_code == 2, result.output
        assert result.stderr == ("Error: --input-shape: the inputs of m.onnx take 1536000000 "
                                 "bytes; the farm's largest device has 1024000000 bytes of "
                                 "memory\n")
        assert store.list_jobs() == []

    def test_shapes_taken_from_the_inputs_are_bounded_too(
            self, farmctl, store: Store, model: Path, tmp_path: Path) -> None:
        """A symbolic batch given by --inputs counts against the largest device's memory."""
        store.upsert_device("TINY", datetime(2026, 1, 1, tzinfo=UTC),
                            {"abi": "arm64-v8a", "mem_total_kb": 1})
        inputs = _npz(tmp_path / "in.npz", images=np.ones((2, 3, 8, 8), "float32"))
        result = farmctl("enqueue", "model", "--model", str(model), "--inputs", inputs)
        assert result.exit_code == 2, result.output
        assert result.stderr == ("Error: --input-shape: the inputs of m.onnx take 1536 bytes; "
                                 "the farm's largest device has 1024 bytes of memory\n")
        assert store.list_jobs() == []
