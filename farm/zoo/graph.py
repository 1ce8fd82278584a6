"""A small ONNX graph builder with seeded weights, shaped the way exporters write graphs.

The zoo's models are built from these calls rather than shipped as binaries:
each file stays readable, byte-for-byte the same for a seed, and needs no
download. By default batch normalisation is folded into the convolution
weights, as ``torch.onnx.export`` does in eval mode, so a ``Conv`` carries a
bias; ``Graph(seed, unfold_bn=True)`` writes each ``Conv`` without bias and a
``BatchNormalization`` after it, as Paddle2ONNX, tf2onnx and torch.onnx with
constant folding off write them.

Files are saved with ``ir_version = 9``: onnxruntime refuses IR versions
above what it knows. The zoo's own models use opset 17, the first with
``LayerNormalization``, which TVM 0.27's ONNX frontend imports; the
exporter-shaped variants use their exporter's (11-17).
"""

from __future__ import annotations

from typing import Any

import numpy as np

IR_VERSION = 9
OPSET = 17
#: The symbolic batch dimension every zoo model declares on its input and output.
BATCH = "batch"


#: ``BatchNormalization``'s epsilon as PyTorch and Paddle write it.
BN_EPSILON = 1e-5


class Graph:
    """Nodes, initializers and seeded weights of one model under construction.

    Args:
        seed: seeds :func:`numpy.random.default_rng` for every weight.
        opset: the default domain's opset the model declares (11-17 here).
        unfold_bn: :meth:`conv` writes ``Conv`` (no bias) then ``BatchNormalization``.
        shared_consts: :meth:`shared` writes one initializer per value and an
            ``Identity`` of it per use, as torch.onnx's initializer deduplication does.
    """

    def __init__(self, seed: int, opset: int = OPSET, unfold_bn: bool = False,
                 shared_consts: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        self.opset = opset
        self.unfold_bn = unfold_bn
        self.shared_consts = shared_consts
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._shared: dict[tuple[str, bytes], str] = {}
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

    def shared(self, values: np.ndarray, prefix: str = "c") -> str:
        """A constant used in many places; returns the name a node takes as input.

        A fresh initializer per use, or with ``shared_consts`` one initializer
        and an ``Identity`` of it per use.
        """
        if not self.shared_consts:
            return self.const(values, prefix)
        key = (str(values.dtype), values.tobytes())
        if key not in self._shared:
            self._shared[key] = self.const(values, prefix)
        return self.op("Identity", [self._shared[key]])

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
             group: int = 1, batch_norm: bool | None = None) -> str:
        """``Conv`` NCHW with "same" padding for odd kernels.

        With bias, or without bias and followed by ``BatchNormalization``
        (``batch_norm``; by default the graph's ``unfold_bn``).
        """
        pad = kernel // 2
        w = self.weight((c_out, c_in // group, kernel, kernel), c_in // group * kernel * kernel)
        attrs = {"kernel_shape": [kernel, kernel], "strides": [stride, stride],
                 "pads": [pad] * 4, "group": group}
        if self.unfold_bn if batch_norm is None else batch_norm:
            return self.batch_norm(self.op("Conv", [x, w], **attrs), c_out)
        return self.op("Conv", [x, w, self.bias(c_out)], **attrs)

    def batch_norm(self, x: str, channels: int) -> str:
        """``BatchNormalization`` (inference) over axis 1 with trained-looking statistics.

        Scale near 1, shift, mean and variance drawn so that folding it into the
        preceding weights changes the numbers (a unit BN would fold to nothing).
        """
        scale = (1.0 + self.rng.standard_normal(channels) * 0.1).astype(np.float32)
        shift = (self.rng.standard_normal(channels) * 0.05).astype(np.float32)
        mean = (self.rng.standard_normal(channels) * 0.1).astype(np.float32)
        var = (1.0 + np.abs(self.rng.standard_normal(channels)) * 0.2).astype(np.float32)
        return self.op("BatchNormalization", [x, self.const(scale, "bn_scale"),
                                              self.const(shift, "bn_b"),
                                              self.const(mean, "bn_mean"),
                                              self.const(var, "bn_var")], epsilon=BN_EPSILON)

    def relu6(self, x: str) -> str:
        """ReLU6 as PyTorch exports it at opset 11+: ``Clip`` with min and max inputs."""
        low = self.shared(np.array(0.0, np.float32))
        high = self.shared(np.array(6.0, np.float32))
        return self.op("Clip", [x, low, high])

    def hardswish(self, x: str, form: str = "op") -> str:
        """HardSwish ``x * relu6(x + 3) / 6`` in one of the forms exporters write.

        Args:
            x: the input tensor's name.
            form: ``"op"``: one ``HardSwish`` node (opset 14+: torch.onnx, Paddle2ONNX);
                ``"clip"``: ``Add(x, 3) -> Clip(0, 6) -> Mul(x, .) -> Div(., 6)``
                (Paddle2ONNX below opset 14); ``"hardsigmoid"``:
                ``Mul(x, HardSigmoid(x, alpha=1/6, beta=0.5))`` (tf2onnx, Keras).

        Raises:
            ValueError: an unknown ``form``.
        """
        if form == "op":
            return self.op("HardSwish", [x])
        if form == "clip":
            shifted = self.op("Add", [x, self.shared(np.array(3.0, np.float32))])
            clipped = self.op("Clip", [shifted, self.shared(np.array(0.0, np.float32)),
                                       self.shared(np.array(6.0, np.float32))])
            return self.op("Div", [self.op("Mul", [x, clipped]),
                                   self.shared(np.array(6.0, np.float32))])
        if form == "hardsigmoid":
            return self.op("Mul", [x, self.op("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)])
        raise ValueError(f"unknown HardSwish form {form!r}: op, clip or hardsigmoid")

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
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="farm.zoo", doc_string=doc)
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model
