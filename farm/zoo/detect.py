"""A DBNet-style text detector: strided backbone, FPN with ``Resize``, ``ConvTranspose`` head.

As PaddleOCR's DBNet exports write it: feature maps at strides 4, 8 and 16
are brought to one width by 1x1 convolutions, upsampled by nearest ``Resize``
(``scales`` input) and added top-down; the head is a 3x3 convolution, two
stride-2 ``ConvTranspose`` layers back to the input's size and a ``Sigmoid``
probability map.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from farm.zoo.graph import BATCH, Graph


def _upsample2(g: Graph, x: str) -> str:
    roi = g.const(np.zeros(0, np.float32), "roi")
    scales = g.const(np.array([1.0, 1.0, 2.0, 2.0], np.float32), "scales")
    return g.op("Resize", [x, roi, scales], mode="nearest",
                coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def _deconv(g: Graph, x: str, c_in: int, c_out: int) -> str:
    w = g.weight((c_in, c_out, 2, 2), c_in * 4)
    return g.op("ConvTranspose", [x, w, g.bias(c_out)], kernel_shape=[2, 2], strides=[2, 2])


def det_head(seed: int, small: bool) -> tuple[Any, int]:
    """The detector described in the module doc.

    Returns:
        ``(ModelProto, input side in pixels)``; the output is ``[batch, 1, side, side]``.
    """
    side = 64 if small else 160
    widths = [16, 32, 64] if not small else [8, 16, 16]
    inner = 32 if not small else 8
    g = Graph(seed)
    x = g.op("Relu", [g.conv("x", 3, widths[0], 3, stride=2)])
    features = []
    c = widths[0]
    for width in widths:  # strides 4, 8, 16
        x = g.op("Relu", [g.conv(x, c, width, 3, stride=2)])
        x = g.op("Relu", [g.conv(x, width, width, 3)])
        features.append((x, width))
        c = width
    top = g.conv(features[-1][0], features[-1][1], inner, 1)
    for feature, width in reversed(features[:-1]):
        top = g.op("Add", [_upsample2(g, top), g.conv(feature, width, inner, 1)])
    y = g.op("Relu", [g.conv(top, inner, inner // 2, 3)])
    y = g.op("Relu", [_deconv(g, y, inner // 2, inner // 2)])
    y = g.op("Sigmoid", [_deconv(g, y, inner // 2, 1)])
    doc = "DBNet-style text detector with random weights (farm.zoo)"
    return g.model([BATCH, 3, side, side], y, [BATCH, 1, side, side], doc), side
