"""``nn.max_pool2d`` in channel blocks (as a depthwise conv's input), for CPU builds.

TOPI's pool (``topi.nn.pool2d``, NCHW) takes its output row as the vector:
with a stride of 2 each lane reads its own input column, one scalar load a
lane. ResNet-18's 3x3 stride-2 max pool of 64 x 56 x 56 ran 0.200 ms so,
onnxruntime's (NCHWc, a vector of channels) 0.016 ms (1 thread, AVX-512).
Here the pool copies its padded input into channel blocks, as a depthwise
conv does (the copy named :data:`~farm.jobs.cpu_schedules.legalize_conv.DEPTHWISE_PACK`,
so that :class:`~farm.jobs.cpu_schedules.TiledReduction` computes it one
block at a time inside its parallel loop, and a conv before it hands its
output over in those blocks: :mod:`farm.jobs.cpu_schedules.handoff`), takes
the maximum of each window over a vector of channels and writes NCHW back.
"""

from __future__ import annotations

from typing import Any

from farm.jobs.cpu_schedules.legalize_conv import (
    DEPTHWISE_PACK,
    _block,
    current_target,
    target_lanes,
)

__all__ = ["POOL_BLOCKS", "legalize_max_pool2d"]

#: The block of the pool's result in channel blocks, ``[N, C/b, OH, OW, b]``.
POOL_BLOCKS = "max_pool2d_nchwc"


def legalize_max_pool2d(bb: Any, call: Any) -> Any:
    """max_pool2d NCHW, float32, in channel blocks; else TVM's legalization.

    Kept as TVM writes it: another layout or dtype, dilation, ``ceil_mode``,
    or channels that give no block of at least 8 lanes (or the target's lanes).
    """
    from tvm.relax.transform.legalize_ops.nn import _nn_max_pool2d

    attrs = call.attrs
    try:
        n, c, h, w = (int(d) for d in call.args[0].ty.shape.values)
    except (AttributeError, TypeError, ValueError):
        return _nn_max_pool2d(bb, call)
    lanes = target_lanes(current_target())
    block = _block(c, lanes, min(lanes, 8))
    if (block is None or attrs.layout != "NCHW" or attrs.out_layout != "NCHW"
            or bool(attrs.ceil_mode) or any(int(d) != 1 for d in attrs.dilation)
            or str(call.args[0].ty.dtype) != "float32"):
        return _nn_max_pool2d(bb, call)
    kh, kw = (int(k) for k in attrs.pool_size)
    sy, sx = (int(s) for s in attrs.strides)
    top, left, bottom, right = (int(p) for p in attrs.padding)
    oh = (h + top + bottom - kh) // sy + 1
    ow = (w + left + right - kw) // sx + 1

    def compute(data: Any) -> Any:
        from tvm import te, tirx

        lowest = tirx.min_value("float32")

        def value(b: Any, cb: Any, y: Any, x: Any, ci: Any) -> Any:
            inside = tirx.all(y >= top, y < top + h, x >= left, x < left + w)
            return tirx.if_then_else(inside, data[b, cb * block + ci, y - top, x - left], lowest)

        packed = te.compute((n, c // block, h + top + bottom, w + left + right, block), value,
                            name=DEPTHWISE_PACK)
        ry = te.reduce_axis((0, kh), name="ry")
        rx = te.reduce_axis((0, kw), name="rx")
        pooled = te.compute(
            (n, c // block, oh, ow, block),
            lambda b, cb, y, x, ci: te.max(packed[b, cb, y * sy + ry, x * sx + rx, ci],
                                           axis=[ry, rx]),
            name=POOL_BLOCKS)
        return te.compute((n, c, oh, ow),
                          lambda b, ch, y, x: pooled[b, ch // block, y, x, ch % block],
                          name="max_pool2d_unpack")

    return bb.call_te(compute, call.args[0], primfunc_name_hint="max_pool2d")
