"""A small ONNX graph builder with seeded weights, shaped the way exporters write graphs.

The zoo's models are built from these calls rather than shipped as binaries:
each file stays readable, byte-for-byte the same for a seed, and needs no
download. Batch normalisation is folded into the convolution weights, as
``torch.onnx.export`` does in eval mode, so a ``Conv`` carries a bias.

Files are saved with ``ir_version = 9`` and opset 17: onnxruntime refuses IR
versions above what it knows, and opset 17 is the first with
``LayerNormalization``, which TVM 0.27's ONNX frontend imports.
"""

from __future__ import annotations

from typing import Any

import numpy as np

IR_VERSION = 9
OPSET = 17
#: The symbolic batch dimension every zoo model declares on its input and output.
BATCH = "batch"


class Graph:
    """Nodes, initializers and seeded weights of one model under construction.

    Args:
        seed: seeds :func:`numpy.random.default_rng` for every weight.
    """

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def name(self, prefix: str) -> str:
        """A fresh tensor name ``prefix_N``."""
        self._count += 1
        return f"{prefix}_{self._count}"

    def const(self, values: np.ndarray, prefix: str = "c") -> str:
        """An initializer holding ``values``; returns its name."""
        from onnx import numpy_helper

        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(values, name))
        return name

    def weight(self, shape: tuple[int, ...], fan_in: int) -> str:
        """He-initialised float32 weights (std sqrt(2 / fan_in)): activations keep their scale."""
        values = self.rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in, 1))
        return self.const(values.astype(np.float32), "w")

    def bias(self, size: int) -> str:
        """Small float32 biases."""
        return self.const((self.rng.standard_normal(size) * 0.05).astype(np.float32), "b")

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        """Append a one-output node; returns its output name."""
        from onnx import helper

        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, c_in: int, c_out: int, kernel: int, stride: int = 1,
             group: int = 1) -> str:
        """``Conv`` NCHW with bias and "same" padding for odd kernels."""
        pad = kernel // 2
        w = self.weight((c_out, c_in // group, kernel, kernel), c_in // group * kernel * kernel)
        return self.op("Conv", [x, w, self.bias(c_out)], kernel_shape=[kernel, kernel],
                       strides=[stride, stride], pads=[pad] * 4, group=group)

    def relu6(self, x: str) -> str:
        """ReLU6 as PyTorch exports it at opset 11+: ``Clip`` with min and max inputs."""
        low = self.const(np.array(0.0, np.float32))
        high = self.const(np.array(6.0, np.float32))
        return self.op("Clip", [x, low, high])

    def flatten_by_shape(self, x: str) -> str:
        """``x.view(x.size(0), -1)`` as torch.onnx writes it: a shape computed in the graph.

        Shape -> Gather(0) -> Unsqueeze -> Concat with [-1] -> Reshape: the
        computed-shape Reshape that some frontends cannot import without
        simplification.
        """
        shape = self.op("Shape", [x])
        batch = self.op("Gather", [shape, self.const(np.array(0, np.int64))], axis=0)
        batch_1d = self.op("Unsqueeze", [batch, self.const(np.array([0], np.int64))])
        target = self.op("Concat", [batch_1d, self.const(np.array([-1], np.int64))], axis=0)
        return self.op("Reshape", [x, target])

    def gemm(self, x: str, k: int, n: int) -> str:
        """A fully connected layer as ``Gemm`` with ``transB=1`` (PyTorch's ``nn.Linear``)."""
        w = self.weight((n, k), k)
        return self.op("Gemm", [x, w, self.bias(n)], transB=1)

    def model(self, x_shape: list[Any], out: str, out_shape: list[Any], doc: str) -> Any:
        """The finished, checked ``ModelProto`` with input ``x`` and output ``out``."""
        import onnx
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            self.nodes, "zoo",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            initializer=self.initializers,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="farm.zoo", doc_string=doc)
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model
