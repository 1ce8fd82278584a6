"""The demo's small ONNX CNN, built at run time with deterministic weights.

``farmctl demo`` times one real model on one phone. Shipping a binary ``.onnx``
would hide what it is; building it from a seeded generator keeps it readable,
small (about 15 KB) and byte-for-byte the same on every run, so its compiled
library is found in the compile cache on a second run.

The graph covers the operators the seeds' models use: convolution, depthwise
convolution (``group`` = channels), ReLU, max and average pooling, a fully
connected ``Gemm`` and a ``MatMul``::

    x: float32[1, 3, 16, 16]
      -> Conv 3->8, 3x3, pad 1 -> Relu
      -> depthwise Conv 8, 3x3, pad 1 -> Relu
      -> MaxPool 2x2 -> AveragePool 2x2        float32[1, 8, 4, 4]
      -> Flatten -> Gemm 128->16 -> Relu -> MatMul 16->10
    y: float32[1, 10]

It is saved with ``ir_version = 9`` and opset 13: the installed onnxruntime
refuses IR versions above what it knows (it checks the model's IR version on
load), and onnxruntime is the reference the ``model`` job compares TVM against.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["INPUT_SHAPE", "MODEL_NAME", "OUTPUT_SHAPE", "write_small_cnn"]

MODEL_NAME = "small_cnn"
INPUT_SHAPE = (1, 3, 16, 16)
OUTPUT_SHAPE = (1, 10)
IR_VERSION = 9
OPSET = 13
SEED = 7


def write_small_cnn(path: Path, seed: int = SEED) -> Path:
    """Write the small CNN described in the module doc to ``path``.

    Args:
        path: the ``.onnx`` file to write; its folder must exist.
        seed: seeds the weights (``numpy.random.default_rng``); the same seed
            gives the same file.

    Returns:
        ``path``.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        values = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        return numpy_helper.from_array(values, name)

    channels = 8
    initializers = [
        weight("conv1_w", (channels, 3, 3, 3)),
        weight("conv1_b", (channels,)),
        weight("dw_w", (channels, 1, 3, 3)),
        weight("dw_b", (channels,)),
        weight("fc1_w", (channels * 4 * 4, 16)),
        weight("fc1_b", (16,)),
        weight("fc2_w", (16, OUTPUT_SHAPE[1])),
    ]
    pads = [1, 1, 1, 1]
    nodes = [
        helper.make_node("Conv", ["x", "conv1_w", "conv1_b"], ["c1"], pads=pads),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "dw_w", "dw_b"], ["c2"], pads=pads, group=channels),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["p1"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"]),
        helper.make_node("Gemm", ["f", "fc1_w", "fc1_b"], ["g1"]),
        helper.make_node("Relu", ["g1"], ["r3"]),
        helper.make_node("MatMul", ["r3", "fc2_w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        MODEL_NAME,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(OUTPUT_SHAPE))],
        initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="farm"
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
