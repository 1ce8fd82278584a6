"""A transformer encoder block as ``torch.onnx.export`` writes ``nn.TransformerEncoderLayer``.

Pre-norm: ``LayerNormalization``, Q/K/V ``MatMul`` + ``Add``, heads split by a
``Reshape`` whose shape is computed in the graph (``Shape`` -> ``Gather`` ->
``Unsqueeze`` -> ``Concat``, as exporters write ``x.view(b, s, h, d)``),
``Transpose``, scaled ``MatMul``, ``Softmax``, heads merged the same way, an
output projection and residual, then a feed-forward layer with GELU written
as exporters write the exact form: ``x * 0.5 * (1 + Erf(x / sqrt(2)))``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from farm.zoo.graph import BATCH, Graph


def _linear(g: Graph, x: str, k: int, n: int) -> str:
    w = g.weight((k, n), k)
    return g.op("Add", [g.op("MatMul", [x, w]), g.bias(n)])


def _layer_norm(g: Graph, x: str, dim: int) -> str:
    scale = g.const(np.ones(dim, np.float32), "ln_scale")
    return g.op("LayerNormalization", [x, scale, g.bias(dim)], axis=-1, epsilon=1e-5)


def _dims(g: Graph, x: str, axes: list[int]) -> list[str]:
    """``x.size(a)`` for each of ``axes`` as 1-D int64 tensors, computed from ``Shape``."""
    shape = g.op("Shape", [x])
    unsqueeze = g.const(np.array([0], np.int64))
    return [g.op("Unsqueeze", [g.op("Gather", [shape, g.const(np.array(a, np.int64))], axis=0),
                               unsqueeze]) for a in axes]


def _split_heads(g: Graph, x: str, heads: int, head_dim: int) -> str:
    batch, seq = _dims(g, x, [0, 1])
    rest = g.const(np.array([heads, head_dim], np.int64))
    shaped = g.op("Reshape", [x, g.op("Concat", [batch, seq, rest], axis=0)])
    return g.op("Transpose", [shaped], perm=[0, 2, 1, 3])


def _gelu(g: Graph, x: str) -> str:
    scaled = g.op("Div", [x, g.const(np.array(math.sqrt(2.0), np.float32))])
    one = g.op("Add", [g.op("Erf", [scaled]), g.const(np.array(1.0, np.float32))])
    return g.op("Mul", [g.op("Mul", [x, one]), g.const(np.array(0.5, np.float32))])


def encoder_block(seed: int, small: bool) -> tuple[Any, int]:
    """The block described in the module doc, input ``[batch, seq, dim]``.

    Returns:
        ``(ModelProto, sequence length)``.
    """
    seq, dim, heads = (16, 32, 2) if small else (128, 256, 4)
    head_dim = dim // heads
    g = Graph(seed)
    h = _layer_norm(g, "x", dim)
    q, k, v = (_split_heads(g, _linear(g, h, dim, dim), heads, head_dim) for _ in range(3))
    k_t = g.op("Transpose", [k], perm=[0, 1, 3, 2])
    scores = g.op("Div", [g.op("MatMul", [q, k_t]),
                          g.const(np.array(math.sqrt(head_dim), np.float32))])
    context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
    merged = g.op("Transpose", [context], perm=[0, 2, 1, 3])
    batch, length = _dims(g, "x", [0, 1])
    flat = g.op("Reshape", [merged, g.op("Concat", [batch, length,
                                                    g.const(np.array([dim], np.int64))], axis=0)])
    x = g.op("Add", ["x", _linear(g, flat, dim, dim)])
    y = _gelu(g, _linear(g, _layer_norm(g, x, dim), dim, 4 * dim))
    out = g.op("Add", [x, _linear(g, y, 4 * dim, dim)])
    doc = "Transformer encoder block with random weights (farm.zoo)"
    return g.model([BATCH, seq, dim], out, [BATCH, seq, dim], doc), seq
