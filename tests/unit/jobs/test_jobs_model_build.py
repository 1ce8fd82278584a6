"""Loading and compiling ONNX models on the host, without a phone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from exported_models import write_computed_reshape
from onnx import TensorProto, helper

from farm.errors import CompileError, SpecError
from farm.jobs.cache import CompileCache
from farm.jobs.model import (
    build_model,
    import_note,
    load_model,
    random_inputs,
    reference_outputs,
)
from farm.jobs.params import ModelParams


def _save(path: Path, node: onnx.NodeProto, dims: list, extra_opsets=()) -> Path:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), *extra_opsets])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


class TestLoadModel:
    def test_symbolic_dimension_needs_a_shape(self, tmp_path: Path) -> None:
        """An input with a named batch dimension is refused unless its shape is given."""
        path = _save(tmp_path / "relu.onnx", helper.make_node("Relu", ["x"], ["y"]), ["batch", 4])
        with pytest.raises(SpecError) as info:
            load_model(path)
        assert info.value.field == "params.input_shapes"
        _, inputs = load_model(path, {"x": (2, 4)})
        assert inputs[0].shape == (2, 4)

    def test_missing_file_names_the_field(self, tmp_path: Path) -> None:
        """A path that does not exist is a SpecError on params.model_path."""
        with pytest.raises(SpecError) as info:
            load_model(tmp_path / "none.onnx")
        assert info.value.field == "params.model_path"


class TestBuildModel:
    def test_unsupported_operator_is_a_compile_error(self, tmp_path: Path) -> None:
        """A valid ONNX file with an operator TVM lacks fails as CompileError naming it."""
        node = helper.make_node("FarmUnknownOp", ["x"], ["y"], domain="ai.farm.test")
        path = _save(tmp_path / "odd.onnx", node, [1, 4], [helper.make_opsetid("ai.farm.test", 1)])
        with pytest.raises(CompileError) as info:
            build_model(ModelParams(path), {"kind": "llvm"}, CompileCache(tmp_path / "c"))
        assert "FarmUnknownOp" in info.value.reason

    def test_same_file_and_shapes_build_once(self, small_relu: Path, tmp_path: Path) -> None:
        """The second build of an unchanged model is a cache hit."""
        cache = CompileCache(tmp_path / "c")
        first, _ = build_model(ModelParams(small_relu), {"kind": "llvm"}, cache)
        second, _ = build_model(ModelParams(small_relu), {"kind": "llvm"}, cache)
        assert first == second
        assert (cache.misses, cache.hits) == (1, 1)


@pytest.fixture
def small_relu(tmp_path: Path) -> Path:
    """A one-node ONNX model with a fixed shape."""
    return _save(tmp_path / "relu.onnx", helper.make_node("Relu", ["x"], ["y"]), [1, 4])


class TestExportedGraphs:
    def test_computed_reshape_imports_simplified(self, tmp_path: Path) -> None:
        """A Reshape with a computed shape TVM refuses builds simplified, the build says so,
        and the library computes what onnxruntime computes from the original file."""
        import tvm
        from tvm import relax

        path = write_computed_reshape(tmp_path / "0123abcd.onnx")
        params = ModelParams(path, {"images": (2, 3, 8, 8)}, name="detector.onnx")
        library, inputs = build_model(params, {"kind": "llvm"}, CompileCache(tmp_path / "c"))
        note = import_note(library)
        assert note is not None
        assert note.startswith("imported after simplification:")
        assert "node 'floor' (Floor)" in note
        vm = relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu())
        feeds = random_inputs(inputs, seed=1)
        got = vm["main"](tvm.runtime.tensor(feeds["images"])).numpy()
        (want,) = reference_outputs(path, feeds)
        assert got.shape == (2, 4, 10)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    def test_refused_op_names_file_node_and_op(self, tmp_path: Path) -> None:
        """An op TVM lacks fails naming the user's file (not the store's digest), node and op."""
        node = helper.make_node("FarmUnknownOp", ["x"], ["y"], domain="ai.farm.test",
                                name="odd_node")
        path = _save(tmp_path / f"{'ab' * 32}.onnx", node, [1, 4],
                     [helper.make_opsetid("ai.farm.test", 1)])
        with pytest.raises(CompileError) as info:
            build_model(ModelParams(path, name="odd.onnx"), {"kind": "llvm"},
                        CompileCache(tmp_path / "c"))
        assert info.value.workload == "odd.onnx"
        assert "node 'odd_node' (FarmUnknownOp)" in info.value.reason
        assert "ab" * 32 not in str(info.value)
