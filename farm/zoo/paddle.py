"""Models as Paddle2ONNX writes PaddleClas and PaddleOCR networks: BN unfolded after every Conv.

- :func:`pp_lcnet`: a PP-LCNet-style classifier (PaddleClas ``PPLCNet_x1_0``'s
  table), opset 15: depthwise separable blocks of ``Conv`` +
  ``BatchNormalization`` + ``HardSwish`` (one op, opset 14+), squeeze-and-
  excitation with ``HardSigmoid``, ``GlobalAveragePool``, a 1x1 head ``Conv``,
  ``Flatten`` and ``Gemm``. The full form has PaddleClas's counts: 32 ``Conv``,
  27 ``BatchNormalization``, 28 ``HardSwish``.
- :func:`dbnet`: a DBNet-style text detector (PaddleOCR's det model: a
  MobileNetV3-large x0.5 backbone, DBFPN, DBHead), opset 11: HardSwish as
  ``Add -> Clip -> Mul -> Div`` (Paddle2ONNX's form below opset 14),
  ``HardSigmoid(alpha=0.2)`` in the SE blocks (PaddleOCR's slope), nearest
  ``Resize`` by ``scales`` in the top-down path and to a size (``sizes``
  computed from the input's shape, ``scales`` an empty tensor, as opsets 11-12
  require of a resize to a given size) into the concatenation,
  ``ConvTranspose`` + ``BatchNormalization``, ``Sigmoid``.

Both are trimmed as the rest of the zoo is (fewer blocks than published where
the block repeats), and ``small`` keeps every operator with fewer channels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from farm.zoo.graph import BATCH, Graph

#: The opsets these variants declare, as the real Paddle2ONNX exports they imitate do.
LCNET_OPSET = 15
DBNET_OPSET = 11


def _divisible(channels: float, divisor: int = 8) -> int:
    """PaddleClas/PaddleOCR ``make_divisible``: round to ``divisor``, never below 90%."""
    rounded = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * channels else rounded


def _squeeze_excite(g: Graph, x: str, c: int, slope: float) -> str:
    """SE as PaddleClas/PaddleOCR write it: pool, 1x1 (bias) ReLU, 1x1 (bias), HardSigmoid, Mul."""
    squeezed = max(4, c // 4)
    s = g.op("GlobalAveragePool", [x])
    s = g.op("Relu", [g.conv(s, c, squeezed, 1, batch_norm=False)])
    s = g.op("HardSigmoid", [g.conv(s, squeezed, c, 1, batch_norm=False)], alpha=slope, beta=0.5)
    return g.op("Mul", [x, s])


def pp_lcnet(seed: int, small: bool) -> tuple[Any, int]:
    """The PP-LCNet-style classifier of the module doc.

    Returns:
        ``(ModelProto, input side in pixels)``; input ``[batch, 3, side, side]``,
        output ``[batch, classes]``.
    """
    side, classes, scale, last = (64, 10, 0.25, 64) if small else (224, 1000, 1.0, 1280)
    # (kernel, in, out, stride, SE): PaddleClas's NET_CONFIG for PP-LCNet.
    blocks = [(3, 16, 32, 1, False), (3, 32, 64, 2, False), (3, 64, 64, 1, False),
              (3, 64, 128, 2, False), (3, 128, 128, 1, False), (3, 128, 256, 2, False),
              *[(5, 256, 256, 1, False)] * 5, (5, 256, 512, 2, True), (5, 512, 512, 1, True)]
    if small:
        blocks = [(3, 16, 32, 1, False), (3, 32, 64, 2, False), (5, 64, 128, 2, False),
                  (5, 128, 256, 2, True)]
    g = Graph(seed, opset=LCNET_OPSET, unfold_bn=True)
    c = _divisible(16 * scale)
    x = g.hardswish(g.conv("x", 3, c, 3, stride=2))
    for kernel, _, width, stride, se in blocks:
        x = g.hardswish(g.conv(x, c, c, kernel, stride=stride, group=c))
        if se:
            x = _squeeze_excite(g, x, c, 1.0 / 6)
        c_out = _divisible(width * scale)
        x = g.hardswish(g.conv(x, c, c_out, 1))
        c = c_out
    pooled = g.op("GlobalAveragePool", [x])
    head = g.hardswish(g.conv(pooled, c, last, 1, batch_norm=False))
    out = g.gemm(g.op("Flatten", [head], axis=1), last, classes)
    doc = "PP-LCNet-style classifier as Paddle2ONNX writes it, random weights (farm.zoo)"
    return g.model([BATCH, 3, side, side], out, [BATCH, classes], doc), side


def _upsample(g: Graph, x: str, factor: int) -> str:
    """Nearest ``Resize`` by ``scales`` (opset 11 wants the ``roi`` input, empty)."""
    roi = g.const(np.zeros(0, np.float32), "roi")
    scales = g.const(np.array([1.0, 1.0, factor, factor], np.float32), "scales")
    return g.op("Resize", [x, roi, scales], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def _upsample_to(g: Graph, x: str, side: int) -> str:
    """Nearest ``Resize`` to ``side x side``: ``sizes`` = the input's N, C, then the side.

    Opsets 11-12 have no way to leave ``scales`` out by name, so an exporter
    gives it as an empty tensor beside ``sizes`` (ONNX's Resize-11 spec).
    """
    empty = g.const(np.zeros(0, np.float32), "empty")
    batch_channels = g.op("Slice", [g.op("Shape", [x]), g.const(np.array([0], np.int64)),
                                    g.const(np.array([2], np.int64))])
    sizes = g.op("Concat", [batch_channels, g.const(np.array([side, side], np.int64))], axis=0)
    return g.op("Resize", [x, empty, empty, sizes], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def _act(g: Graph, x: str, hswish: bool) -> str:
    return g.hardswish(x, "clip") if hswish else g.op("Relu", [x])


def _backbone(g: Graph, small: bool) -> list[tuple[str, int]]:
    """MobileNetV3-large x0.5 (PaddleOCR's det backbone), trimmed; features at strides 4-32."""
    scale = 0.5 if not small else 0.25
    # (kernel, expanded, out, SE, HardSwish, stride); a stage ends before the next stride 2.
    blocks = [(3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2),
              (3, 72, 24, False, False, 1), (5, 72, 40, True, False, 2),
              (5, 120, 40, True, False, 1), (3, 240, 80, False, True, 2),
              (3, 200, 80, False, True, 1), (3, 480, 112, True, True, 1),
              (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1)]
    if small:
        blocks = [(3, 64, 24, False, False, 2), (5, 72, 40, True, False, 2),
                  (3, 240, 80, False, True, 2), (5, 672, 160, True, True, 2)]
    c = _divisible(16 * scale)
    x = g.hardswish(g.conv("x", 3, c, 3, stride=2), "clip")
    features: list[tuple[str, int]] = []
    strides = 2
    for kernel, expanded, width, se, hswish, stride in blocks:
        if stride == 2 and strides >= 4:  # each stage's output from stride 4 on
            features.append((x, c))
        strides *= stride
        hidden, c_out = _divisible(expanded * scale), _divisible(width * scale)
        y = _act(g, g.conv(x, c, hidden, 1), hswish)
        y = _act(g, g.conv(y, hidden, hidden, kernel, stride=stride, group=hidden), hswish)
        if se:
            y = _squeeze_excite(g, y, hidden, 0.2)
        y = g.conv(y, hidden, c_out, 1)
        x = g.op("Add", [x, y]) if stride == 1 and c == c_out else y
        c = c_out
    last = _divisible(960 * scale)
    features.append((g.hardswish(g.conv(x, c, last, 1), "clip"), last))
    return features


def _deconv(g: Graph, x: str, c_in: int, c_out: int, bias: bool) -> str:
    w = g.weight((c_in, c_out, 2, 2), c_in * 4)
    inputs = [x, w, g.bias(c_out)] if bias else [x, w]
    return g.op("ConvTranspose", inputs, kernel_shape=[2, 2], strides=[2, 2])


def dbnet(seed: int, small: bool) -> tuple[Any, int]:
    """The DBNet-style detector of the module doc.

    Returns:
        ``(ModelProto, input side in pixels)``; input ``[batch, 3, side, side]``,
        output the probability map ``[batch, 1, side, side]``.
    """
    side, inner = (64, 16) if small else (320, 96)
    g = Graph(seed, opset=DBNET_OPSET, unfold_bn=True)
    features = _backbone(g, small)
    # DBFPN: 1x1 to ``inner`` (no bias, no BN), top-down nearest x2 and Add,
    # 3x3 to inner/4, each brought to stride 4 and concatenated.
    laterals = [g.conv(f, c, inner, 1, batch_norm=False) for f, c in features]
    tops = [laterals[-1]]
    for lateral in reversed(laterals[:-1]):
        tops.append(g.op("Add", [lateral, _upsample(g, tops[-1], 2)]))
    smoothed = [g.conv(t, inner, inner // 4, 3, batch_norm=False) for t in reversed(tops)]
    fused = g.op("Concat", [smoothed[0], *(_upsample_to(g, s, side // 4)
                                           for s in smoothed[1:])], axis=1)
    # DBHead's binarize branch: Conv+BN+ReLU, ConvTranspose+BN+ReLU, ConvTranspose, Sigmoid.
    quarter = inner // 4
    y = g.op("Relu", [g.conv(fused, inner, quarter, 3)])
    y = g.op("Relu", [g.batch_norm(_deconv(g, y, quarter, quarter, bias=True), quarter)])
    y = g.op("Sigmoid", [_deconv(g, y, quarter, 1, bias=True)])
    doc = "DBNet-style text detector as Paddle2ONNX writes it, random weights (farm.zoo)"
    return g.model([BATCH, 3, side, side], y, [BATCH, 1, side, side], doc), side
