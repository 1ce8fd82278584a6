"""A text-direction classifier as tf2onnx writes a Keras MobileNetV3-small: NHWC in, opset 13.

The 0/180-degree classifier of OCR pipelines (PaddleOCR's ``cls`` model is a
MobileNetV3-small x0.35 on 48x192 text lines), written as tf2onnx converts
the Keras network:

- the input is NHWC (``[batch, 48, 192, 3]``) and a ``Transpose`` brings it
  to NCHW for the convolutions; Keras's ``GlobalAveragePooling2D`` stays a
  ``ReduceMean`` over NHWC's axes 1 and 2 between two ``Transpose`` nodes,
  where tf2onnx's transpose optimizer could not push the layout through;
- every ``Conv`` (no bias) is followed by ``BatchNormalization`` (tf2onnx
  converts ``FusedBatchNormV3`` as it is: 34 in the full form);
- HardSwish is ``x * HardSigmoid(x)`` (Keras's ``hard_swish``, tf2onnx's
  ``HardSigmoid`` rewrite), the SE gate a ``HardSigmoid``;
- the head is ``MatMul`` + ``Add`` (Keras ``Dense``) and ``Softmax``.
"""

from __future__ import annotations

from typing import Any

from farm.zoo.graph import BATCH, Graph

#: The opset this variant declares, as the real tf2onnx export it imitates does.
OPSET = 13
_TO_NCHW = [0, 3, 1, 2]
_TO_NHWC = [0, 2, 3, 1]


def _pool_nhwc(g: Graph, x: str, keepdims: int) -> str:
    """Keras's ``GlobalAveragePooling2D`` as tf2onnx leaves it: ``ReduceMean`` over NHWC's H, W."""
    pooled = g.op("ReduceMean", [g.op("Transpose", [x], perm=_TO_NHWC)], axes=[1, 2],
                  keepdims=keepdims)
    return g.op("Transpose", [pooled], perm=_TO_NCHW) if keepdims else pooled


def _squeeze_excite(g: Graph, x: str, c: int) -> str:
    squeezed = max(8, c // 4)
    s = g.op("Relu", [g.conv(_pool_nhwc(g, x, 1), c, squeezed, 1, batch_norm=False)])
    s = g.op("HardSigmoid", [g.conv(s, squeezed, c, 1, batch_norm=False)],
             alpha=1.0 / 6, beta=0.5)
    return g.op("Mul", [x, s])


def _dense(g: Graph, x: str, k: int, n: int) -> str:
    return g.op("Add", [g.op("MatMul", [x, g.weight((k, n), k)]), g.bias(n)])


def text_direction(seed: int, small: bool) -> tuple[Any, int]:
    """The classifier of the module doc.

    Returns:
        ``(ModelProto, input height in pixels)``; input ``[batch, height, 4 * height, 3]``
        (NHWC), output the two directions' probabilities ``[batch, 2]``.
    """
    height = 48 if not small else 16
    # (kernel, expanded, out, SE, HardSwish, stride): Keras's MobileNetV3Small table,
    # channels x0.35 rounded to a multiple of 8.
    blocks = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2),
              (3, 88, 24, False, False, 1), (5, 96, 40, True, True, 2),
              (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
              (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1),
              (5, 288, 96, True, True, 2), (5, 576, 96, True, True, 1),
              (5, 576, 96, True, True, 1)]
    if small:
        blocks = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2),
                  (5, 96, 40, True, True, 2)]

    def depth(channels: int) -> int:
        scaled = channels * 0.35
        return max(8, int(scaled + 4) // 8 * 8)

    g = Graph(seed, opset=OPSET, unfold_bn=True)
    c = 16
    x = g.hardswish(g.conv(g.op("Transpose", ["x"], perm=_TO_NCHW), 3, c, 3, stride=2),
                    "hardsigmoid")
    for index, (kernel, expanded, width, se, hswish, stride) in enumerate(blocks):
        hidden, c_out = depth(expanded) if index else c, depth(width)
        y = x
        if index:  # Keras's block 0 has no expansion
            y = g.conv(y, c, hidden, 1)
            y = g.hardswish(y, "hardsigmoid") if hswish else g.op("Relu", [y])
        y = g.conv(y, hidden, hidden, kernel, stride=stride, group=hidden)
        y = g.hardswish(y, "hardsigmoid") if hswish else g.op("Relu", [y])
        if se:
            y = _squeeze_excite(g, y, hidden)
        y = g.conv(y, hidden, c_out, 1)
        x = g.op("Add", [x, y]) if stride == 1 and c == c_out else y
        c = c_out
    last, hidden_fc = depth(576), 1024 if not small else 32
    x = g.hardswish(g.conv(x, c, last, 1), "hardsigmoid")
    y = g.hardswish(_dense(g, _pool_nhwc(g, x, 0), last, hidden_fc), "hardsigmoid")
    out = g.op("Softmax", [_dense(g, y, hidden_fc, 2)], axis=-1)
    doc = "Text-direction classifier as tf2onnx writes it, random weights (farm.zoo)"
    return g.model([BATCH, height, 4 * height, 3], out, [BATCH, 2], doc), height
