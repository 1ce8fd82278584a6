"""Image classifiers of the zoo: MobileNetV2-, MobileNetV3-small- and ResNet-18-style.

Each keeps its family's blocks and operators as ``torch.onnx.export`` writes
them (folded batch norm, ``Clip`` for ReLU6, ``HardSwish``/``HardSigmoid``,
squeeze-and-excitation, ``GlobalAveragePool``, ``Gemm`` classifier) with fewer
stages than the published networks, so a 2-core host compiles and times them
in seconds. ``small`` keeps the same operators with fewer channels and blocks.
"""

from __future__ import annotations

from typing import Any

from farm.zoo.graph import BATCH, Graph


def _head(g: Graph, x: str, channels: int, classes: int) -> str:
    pooled = g.op("GlobalAveragePool", [x])
    return g.gemm(g.flatten_by_shape(pooled), channels, classes)


def mobilenet_v2(seed: int, small: bool) -> tuple[Any, int]:
    """MobileNetV2-style: inverted residuals (1x1 expand, 3x3 depthwise, 1x1 project), ReLU6.

    Returns:
        ``(ModelProto, input side in pixels)``.
    """
    return _mobilenet_v2(Graph(seed), small, "MobileNetV2-style classifier")


def mobilenet_v2_torch(seed: int, small: bool) -> tuple[Any, int]:
    """:func:`mobilenet_v2` as torch.onnx writes it with constant folding off, opset 17.

    Every ``Conv`` has no bias and a ``BatchNormalization`` after it (28 in the
    full form), and each ``Clip``'s bounds are ``Identity`` nodes of one shared
    pair of initializers, as torch.onnx's initializer deduplication leaves them.
    """
    return _mobilenet_v2(Graph(seed, unfold_bn=True, shared_consts=True), small,
                         "MobileNetV2-style classifier as torch.onnx writes it, BN unfolded")


def _mobilenet_v2(g: Graph, small: bool, title: str) -> tuple[Any, int]:
    side, classes = (64, 10) if small else (224, 1000)
    # (expansion, out channels, blocks, stride): the published table, trimmed.
    stages = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2), (6, 64, 2, 2), (6, 96, 1, 1),
              (6, 160, 1, 2)]
    if small:
        stages = [(1, 8, 1, 1), (4, 16, 2, 2), (4, 24, 1, 2)]
    c = 32 if not small else 8
    x = g.relu6(g.conv("x", 3, c, 3, stride=2))
    for expansion, c_out, blocks, stride in stages:
        for i in range(blocks):
            s = stride if i == 0 else 1
            hidden = c * expansion
            y = x
            if expansion != 1:
                y = g.relu6(g.conv(y, c, hidden, 1))
            y = g.relu6(g.conv(y, hidden, hidden, 3, stride=s, group=hidden))
            y = g.conv(y, hidden, c_out, 1)
            x = g.op("Add", [x, y]) if s == 1 and c == c_out else y
            c = c_out
    last = 1280 if not small else 64
    x = g.relu6(g.conv(x, c, last, 1))
    out = _head(g, x, last, classes)
    doc = f"{title} with random weights (farm.zoo)"
    return g.model([BATCH, 3, side, side], out, [BATCH, classes], doc), side


def _squeeze_excite(g: Graph, x: str, c: int) -> str:
    """SE block as torchvision writes it: pool, 1x1 reduce, ReLU, 1x1 expand, HardSigmoid, Mul."""
    squeezed = max(8, c // 4)
    s = g.op("GlobalAveragePool", [x])
    s = g.op("Relu", [g.conv(s, c, squeezed, 1)])
    s = g.op("HardSigmoid", [g.conv(s, squeezed, c, 1)], alpha=1.0 / 6, beta=0.5)
    return g.op("Mul", [x, s])


def mobilenet_v3_small(seed: int, small: bool) -> tuple[Any, int]:
    """MobileNetV3-small-style: HardSwish, SE blocks with HardSigmoid, ``Flatten`` head."""
    side, classes = (64, 10) if small else (224, 1000)
    # (kernel, expanded, out, SE, HardSwish, stride): torchvision's table, trimmed.
    blocks = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2),
              (3, 88, 24, False, False, 1), (5, 96, 40, True, True, 2),
              (5, 240, 40, True, True, 1), (5, 144, 48, True, True, 1),
              (5, 288, 96, True, True, 2), (5, 576, 96, True, True, 1)]
    if small:
        blocks = [(3, 16, 16, True, False, 2), (3, 32, 24, False, False, 2),
                  (5, 48, 24, True, True, 1)]
    g = Graph(seed)
    c = 16
    x = g.op("HardSwish", [g.conv("x", 3, c, 3, stride=2)])
    for kernel, hidden, c_out, se, hswish, stride in blocks:
        act = "HardSwish" if hswish else "Relu"
        y = x
        if hidden != c:
            y = g.op(act, [g.conv(y, c, hidden, 1)])
        y = g.op(act, [g.conv(y, hidden, hidden, kernel, stride=stride, group=hidden)])
        if se:
            y = _squeeze_excite(g, y, hidden)
        y = g.conv(y, hidden, c_out, 1)
        x = g.op("Add", [x, y]) if stride == 1 and c == c_out else y
        c = c_out
    last = 576 if not small else 48
    x = g.op("HardSwish", [g.conv(x, c, last, 1)])
    pooled = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    hidden_fc = 1024 if not small else 32
    y = g.op("HardSwish", [g.gemm(pooled, last, hidden_fc)])
    out = g.gemm(y, hidden_fc, classes)
    doc = "MobileNetV3-small-style classifier with random weights (farm.zoo)"
    return g.model([BATCH, 3, side, side], out, [BATCH, classes], doc), side


def resnet18(seed: int, small: bool) -> tuple[Any, int]:
    """ResNet-18-style: 7x7 stem, max pool, basic blocks with 1x1 strided shortcuts."""
    side, classes = (64, 10) if small else (112, 1000)
    widths = [64, 128, 256, 512] if not small else [8, 16]
    g = Graph(seed)
    c = widths[0]
    x = g.op("Relu", [g.conv("x", 3, c, 7, stride=2)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for stage, width in enumerate(widths):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = g.op("Relu", [g.conv(x, c, width, 3, stride=stride)])
            y = g.conv(y, width, width, 3)
            shortcut = x if stride == 1 and c == width else g.conv(x, c, width, 1, stride=stride)
            x = g.op("Relu", [g.op("Add", [y, shortcut])])
            c = width
    out = _head(g, x, c, classes)
    doc = "ResNet-18-style classifier with random weights (farm.zoo)"
    return g.model([BATCH, 3, side, side], out, [BATCH, classes], doc), side
