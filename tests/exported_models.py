"""Small ONNX models written as exporters write them, for tests.

:func:`write_computed_reshape` is a conv net whose flatten takes its target
shape from a subgraph computed at run time, with a dynamic batch dimension,
the way PyTorch's exporter writes ``x.view(x.size(0), x.size(2) // 2, -1)``
when the division goes through float (``Cast -> Div -> Floor -> Cast``)::

    images: float32[batch, 3, 8, 8]
      -> Conv 3->8, 3x3, pad 1 -> Relu                    float32[batch, 8, 8, 8]
      -> Reshape to [Shape[0], floor(Shape[2] / 2), -1]   float32[batch, 4, 128]
      -> MatMul 128->10                                   float32[batch, 4, 10]
    logits

TVM 0.27's ONNX frontend refuses it (``Floor`` gets a folded scalar, not a
tensor); with fixed input shapes onnx-simplifier folds the shape subgraph away.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["write_computed_reshape"]


def _const(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def write_computed_reshape(path: Path, seed: int = 0) -> Path:
    """Write the computed-shape model (about 5 KB, opset 13, IR 9) to ``path``."""
    rng = np.random.default_rng(seed)
    inits = [
        _const("w", rng.standard_normal((8, 3, 3, 3)).astype("float32") * 0.3),
        _const("fc", rng.standard_normal((128, 10)).astype("float32") * 0.1),
        _const("i0", np.array(0, np.int64)), _const("i2", np.array(2, np.int64)),
        _const("two", np.array(2.0, np.float32)), _const("ax0", np.array([0], np.int64)),
        _const("minus1", np.array([-1], np.int64)),
    ]
    node = helper.make_node
    nodes = [
        node("Conv", ["images", "w"], ["conv"], pads=[1, 1, 1, 1], name="conv"),
        node("Relu", ["conv"], ["relu"], name="relu"),
        node("Shape", ["relu"], ["shape"], name="shape"),
        node("Gather", ["shape", "i0"], ["batch"], axis=0, name="gather_batch"),
        node("Gather", ["shape", "i2"], ["height"], axis=0, name="gather_height"),
        node("Cast", ["height"], ["height_f"], to=TensorProto.FLOAT, name="cast_float"),
        node("Div", ["height_f", "two"], ["half_f"], name="div"),
        node("Floor", ["half_f"], ["half_floor"], name="floor"),
        node("Cast", ["half_floor"], ["half"], to=TensorProto.INT64, name="cast_int"),
        node("Unsqueeze", ["batch", "ax0"], ["batch_1"], name="unsqueeze_batch"),
        node("Unsqueeze", ["half", "ax0"], ["half_1"], name="unsqueeze_half"),
        node("Concat", ["batch_1", "half_1", "minus1"], ["new_shape"], axis=0, name="concat"),
        node("Reshape", ["relu", "new_shape"], ["flat"], name="reshape"),
        node("MatMul", ["flat", "fc"], ["logits"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes, "computed_reshape",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "h", 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 9  # onnxruntime refuses newer IR versions
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
