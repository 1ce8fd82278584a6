"""Graph passes on imported exports: batch norm folded, activations fused into the conv."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper
from structlog.testing import capture_logs
from tvm import relax

from farm.jobs.cache import CompileCache
from farm.jobs.cpu_schedules import TiledReduction
from farm.jobs.cpu_schedules.build import compile_cpu
from farm.jobs.graph_passes import count_ops
from farm.jobs.model import build_model, import_note, reference_outputs, tunable_module
from farm.jobs.onnx_import import Imported, import_relax
from farm.jobs.params import ModelParams

TARGET = tvm.target.Target({"kind": "llvm"})
C = 8
X_SHAPE = [1, 3, 10, 10]


class _Graph:
    """A one-input graph under construction, seeded weights as initializers."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def const(self, values: Any, dtype: Any = np.float32) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{op_type.lower()}{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, bias: bool = False) -> str:
        w = self.const(self.rng.standard_normal((C, X_SHAPE[1], 3, 3)) * 0.3)
        b = [self.const(self.rng.normal(0, 0.1, C))] if bias else []
        return self.op("Conv", [x, w, *b], kernel_shape=[3, 3], pads=[1, 1, 1, 1])

    def bn(self, x: str, channels: int = C) -> str:
        return self.op("BatchNormalization", [
            x, self.const(self.rng.uniform(0.5, 1.5, channels)),
            self.const(self.rng.normal(0, 0.2, channels)),
            self.const(self.rng.normal(0, 0.2, channels)),
            self.const(self.rng.uniform(0.5, 1.5, channels))])

    def hardswish(self, x: str, form: str) -> str:
        if form == "op":
            return self.op("HardSwish", [x])
        if form == "hardsigmoid":
            return self.op("Mul", [x, self.op("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)])
        clipped = self.op("Clip", [self.op("Add", [x, self.const(3.0)]), self.const(0.0),
                                   self.const(6.0)])
        return self.op("Div", [self.op("Mul", [x, clipped]), self.const(6.0)])

    def save(self, path: Path, out: str, x_shape: list[int], y_shape: list[int],
             opset: int = 15) -> Path:
        graph = helper.make_graph(
            self.nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, y_shape)],
            initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 9
        onnx.checker.check_model(model)
        onnx.save(model, str(path))
        return path


def _imported(path: Path, x_shape: list[int]) -> Imported:
    return import_relax(onnx.load(str(path)), {"x": x_shape}, {"x": "float32"}, path.name)


def _matches_onnxruntime(path: Path, imported: Imported, x_shape: list[int]) -> bool:
    """Whether the built module's output is onnxruntime's at the model job's tolerance."""
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    vm = relax.VirtualMachine(compile_cpu(imported.mod, TARGET, None), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    (want,) = reference_outputs(path, {"x": x})
    job = ModelParams(model_path=path)
    return bool(np.allclose(got, want, rtol=job.rtol, atol=job.atol))


def _kernels(imported: Imported) -> dict[str, Any]:
    """name -> PrimFunc of the fused module the build schedules."""
    fused = tunable_module(imported.mod, TARGET)
    return {gv.name_hint: f for gv, f in fused.functions.items()
            if isinstance(f, tvm.tirx.PrimFunc)}


class TestBatchNormFolding:
    @pytest.mark.parametrize("bias", [False, True], ids=["conv", "conv_with_bias"])
    def test_conv_batch_norm_is_one_kernel(self, tmp_path: Path, bias: bool) -> None:
        """Conv then BatchNormalization builds as one conv kernel whose epilogue adds the bias."""
        g = _Graph()
        y = g.op("Relu", [g.bn(g.conv("x", bias))])
        path = g.save(tmp_path / "conv_bn.onnx", y, X_SHAPE, [1, C, *X_SHAPE[2:]])
        imported = _imported(path, X_SHAPE)
        assert count_ops(imported.mod)["relax.nn.batch_norm"] == 0
        assert imported.note is not None
        assert "folded 1 BatchNormalization into Conv" in imported.note
        (name,) = _kernels(imported)
        assert name.startswith("fused_conv2d_add") and name.endswith("relu")
        assert _matches_onnxruntime(path, imported, X_SHAPE)

    @pytest.mark.parametrize("op_type", ["Gemm", "MatMul"])
    def test_dense_batch_norm_is_folded(self, tmp_path: Path, op_type: str) -> None:
        """A BatchNormalization over Gemm's or MatMul's output channels folds into its weights."""
        g = _Graph()
        w = g.rng.standard_normal((16, C)) * 0.3
        dense = (g.op("Gemm", ["x", g.const(w.T), g.const(np.ones(C))], transB=1)
                 if op_type == "Gemm" else g.op("MatMul", ["x", g.const(w)]))
        path = g.save(tmp_path / "dense_bn.onnx", g.bn(dense), [2, 16], [2, C])
        imported = _imported(path, [2, 16])
        assert count_ops(imported.mod)["relax.nn.batch_norm"] == 0
        assert "into Conv/Gemm/MatMul weights" in (imported.note or "")
        assert [n for n in _kernels(imported) if "batch_norm" in n] == []
        assert _matches_onnxruntime(path, imported, [2, 16])

    def test_lone_batch_norm_is_decomposed(self, tmp_path: Path) -> None:
        """A BatchNormalization with no conv or matmul before it becomes a scale and shift."""
        g = _Graph()
        path = g.save(tmp_path / "bn.onnx", g.bn("x", X_SHAPE[1]), X_SHAPE, X_SHAPE)
        imported = _imported(path, X_SHAPE)
        assert count_ops(imported.mod)["relax.nn.batch_norm"] == 0
        assert "decomposed 1 BatchNormalization" in (imported.note or "")
        assert _matches_onnxruntime(path, imported, X_SHAPE)


class TestEpilogues:
    @pytest.mark.parametrize("form", ["op", "clip", "hardsigmoid"])
    def test_each_hardswish_form_fuses_into_the_conv(self, tmp_path: Path, form: str) -> None:
        """Conv, BatchNormalization and HardSwish in any exporter's form run as one conv kernel."""
        g = _Graph()
        y = g.hardswish(g.bn(g.conv("x")), form)
        path = g.save(tmp_path / f"hswish_{form}.onnx", y, X_SHAPE, [1, C, *X_SHAPE[2:]])
        imported = _imported(path, X_SHAPE)
        ((name, func),) = _kernels(imported).items()
        assert name.startswith("fused_conv2d")
        # farm's conv schedule takes the function whole, the epilogue inline on each tile.
        assert TiledReduction().apply(func, TARGET, False) is not None
        assert _matches_onnxruntime(path, imported, X_SHAPE)

    def test_residual_add_fuses_into_the_conv(self, tmp_path: Path) -> None:
        """Conv, BatchNormalization, the add of the block's input and ReLU run as one kernel."""
        g = _Graph()
        shape = [1, C, 6, 6]
        w = g.const(g.rng.standard_normal((C, C, 3, 3)) * 0.3)
        conv = g.op("Conv", ["x", w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        y = g.op("Relu", [g.op("Add", [g.bn(conv), "x"])])
        path = g.save(tmp_path / "residual.onnx", y, shape, shape)
        imported = _imported(path, shape)
        ((name, func),) = _kernels(imported).items()
        assert name == "fused_conv2d_add_add1_relu"
        assert TiledReduction().apply(func, TARGET, False) is not None
        assert _matches_onnxruntime(path, imported, shape)


class TestNoOps:
    def test_identity_and_no_op_reshape_are_removed(self, tmp_path: Path) -> None:
        """Identity and a Reshape to the shape it already has leave no trace and are noted."""
        g = _Graph()
        same = g.op("Reshape", [g.op("Identity", ["x"]), g.const(X_SHAPE, np.int64)])
        path = g.save(tmp_path / "noop.onnx", g.op("Relu", [same]), X_SHAPE, X_SHAPE)
        with capture_logs() as logs:
            imported = _imported(path, X_SHAPE)
        assert count_ops(imported.mod)["relax.reshape"] == 0
        assert imported.passes == ("removed 1 Identity", "removed 1 no-op Reshape")
        assert [e["passes"] for e in logs if e["event"] == "graph_optimized"] == [
            list(imported.passes)]

    def test_untouched_graph_has_no_note(self, tmp_path: Path) -> None:
        """A graph no pass changes is imported with no note."""
        g = _Graph()
        path = g.save(tmp_path / "relu.onnx", g.op("Relu", ["x"]), X_SHAPE, X_SHAPE)
        imported = _imported(path, X_SHAPE)
        assert (imported.note, imported.passes) == (None, ())


class TestResizeBySizes:
    @pytest.mark.parametrize("opset", [11, 12])
    def test_empty_scales_beside_sizes_imports(self, tmp_path: Path, opset: int) -> None:
        """An opset-11/12 Resize by sizes with an empty scales tensor imports and matches."""
        g = _Graph()
        y_shape = [1, C, 2 * X_SHAPE[2], 2 * X_SHAPE[3]]
        conv, roi, scales = g.conv("x"), g.const(np.zeros(0)), g.const(np.zeros(0))
        resized = g.op("Resize", [conv, roi, scales, g.const(y_shape, np.int64)],
                       mode="nearest", coordinate_transformation_mode="asymmetric",
                       nearest_mode="floor")
        path = g.save(tmp_path / "upsample.onnx", resized, X_SHAPE, y_shape, opset=opset)
        imported = _imported(path, X_SHAPE)
        assert imported.passes == ("dropped the empty scales of 1 Resize by sizes",)
        assert onnx.load(str(path)).graph.node[1].input[2] == scales  # the file as it was
        assert _matches_onnxruntime(path, imported, X_SHAPE)


class TestModelJob:
    def test_cached_library_says_which_passes_ran(self, tmp_path: Path) -> None:
        """The model job's build notes the passes beside the library, read again on a cache hit."""
        g = _Graph()
        y = g.op("Relu", [g.bn(g.conv("x"))])
        path = g.save(tmp_path / "exported.onnx", y, X_SHAPE, [1, C, *X_SHAPE[2:]])
        cache = CompileCache(tmp_path / "cache")
        params = ModelParams(model_path=path)
        target = {"kind": "llvm"}
        library, _ = build_model(params, target, cache)
        assert import_note(library) == ("graph passes: folded 1 BatchNormalization into Conv "
                                        "weights")
        assert build_model(params, target, cache)[0] == library
