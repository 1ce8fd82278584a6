"""``nn.conv2d`` in channel blocks (NCHWc, as onnxruntime's MLAS), for CPU builds.

The second item of :mod:`farm.jobs.cpu_schedules.legalize`'s list, which says
why and how fast: the weight packed once as ``OIHW{o}o``, a depthwise conv's
input copied into channel blocks with its padding, output channels padded with
zero filters to whole vectors where that uses more of each vector
(:func:`_padded_block`), never for a conv whose result only a depthwise conv
reads (:func:`depthwise_fed`); the output pixels on one axis where its rows are
shorter than a register tile (:func:`_pixel_axis`). Also the helpers the other legalizations share:
:func:`packed_weight`, :func:`target_lanes`, :func:`current_target`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from farm.jobs.cpu_schedules.common import largest_divisor
from farm.jobs.cpu_schedules.plan import MAX_TILE_ROWS

__all__ = ["BLOCKED_CONV", "DEPTHWISE_CONV", "DEPTHWISE_PACK", "PIXELS_CONV", "current_target",
           "depthwise_fed", "legalize_conv2d", "packed_weight", "target_lanes"]


#: The block of a (not depthwise) conv's result in channel blocks, ``[N, O/ob, OH, OW, ob]``.
BLOCKED_CONV = "conv2d_nchwc"


#: The block of a conv's result in channel blocks with its pixels on one axis,
#: ``[N, O/ob, OH * OW, ob]`` (:func:`_pixel_axis`).
PIXELS_CONV = "conv2d_nchwc_pixels"


#: The block of a depthwise conv's result in channel blocks, ``[N, C/ib, OH, OW, ib]``.
DEPTHWISE_CONV = "depthwise_conv2d_nchwc"


#: The block of a depthwise conv's padded input copy in channel blocks (:func:`_pack_data`).
DEPTHWISE_PACK = "conv2d_pack_data"


def _block(channels: int, lanes: int, smallest: int) -> int | None:
    """The channel block: the largest power of two dividing ``channels``, at most ``lanes``.

    None when it is below ``smallest`` (a vector that short does not pay).

    >>> _block(72, 16, 8), _block(96, 16, 8), _block(3, 16, 8)
    (8, 16, None)
    """
    block = lanes
    while block >= smallest:
        if channels % block == 0:
            return block
        block //= 2
    return None


def _padded_block(channels: int, lanes: int, block: int | None) -> tuple[int | None, int]:
    """(block, channels computed) for a conv whose channels give blocks short of ``lanes``.

    Output channels padded with zero filters to a multiple of ``lanes`` fill
    every lane; kept where that wastes less of the vector than the short
    block does (72 channels: 80 of 16 lanes, 90% used, against blocks of 8,
    50%). The padded channels are computed and never written back.

    >>> _padded_block(72, 16, 8), _padded_block(3, 16, None), _padded_block(8, 16, 8)
    ((16, 80), (None, 3), (8, 8))
    """
    if channels < lanes:
        return block, channels
    padded = -(-channels // lanes) * lanes
    used = channels / padded
    if block is None or used > block / lanes:
        return lanes, padded
    return block, channels


@dataclass(frozen=True)
class _Conv:
    """A conv2d's sizes, its channel blocks and its output size."""

    n: int
    c: int
    h: int
    w: int
    o: int
    kh: int
    kw: int
    depthwise: bool
    ob: int  # output channels per block
    op: int  # output channels computed: ``o``, or ``o`` padded to whole vector blocks
    ib: int  # input channels per block of the input's copy (depthwise only)
    strides: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int, int, int]  # top, left, bottom, right
    pixels: bool = False  # the output's pixels on one axis (:func:`_pixel_axis`)

    @property
    def out_hw(self) -> tuple[int, int]:
        top, left, bottom, right = self.padding
        oh = (self.h + top + bottom - self.dilation[0] * (self.kh - 1) - 1) // self.strides[0] + 1
        ow = (self.w + left + right - self.dilation[1] * (self.kw - 1) - 1) // self.strides[1] + 1
        return oh, ow

    @property
    def weight_order(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(reshape of the OIHW weight, permutation) to its packed layout."""
        if self.depthwise:  # [O/ob, kh, kw, ob]
            return (self.o // self.ob, self.ob, self.kh, self.kw), (0, 2, 3, 1)
        # [O'/ob, C, kh, kw, ob], O' = op (the weight padded with zero filters)
        return (self.op // self.ob, self.ob, self.c, self.kh, self.kw), (0, 2, 3, 4, 1)


def _pixel_axis(oh: int, ow: int) -> bool:
    """Whether a conv's output pixels go on one axis: rows too short for a whole register tile.

    The register tile takes up to ``MAX_TILE_ROWS`` pixels of one output row
    (:class:`farm.jobs.cpu_schedules.TiledReduction`); each weight vector it
    loads serves those pixels. ResNet-18's 3x3 512-channel convs on 4 x 4
    outputs (9.4 MB of weights each, read once per tile) tiled 4 pixels of a
    row by 4 channel vectors; with the 16 pixels on one axis the tile takes 8
    pixels (two rows) by 2 channel vectors, and each weight is read half as
    often. The conv alone, bias and ReLU, 1 thread, AVX-512, pinned, 21
    rounds alternating: 0.62 -> 0.50 ms with its weights in cache, 0.73 ->
    0.70 ms read from eight copies in turn; the model untuned, interleaved
    (``bench/bench_ab_untuned.py``, 25 rounds): 0.93-0.94x. Only where the
    one axis gives a longer tile than the row (4 x 4: 8 pixels against 4;
    7 x 7: 7 either way), and the row is shorter than a tile, so that wider
    images keep their tiles within a row.

    >>> _pixel_axis(4, 4), _pixel_axis(7, 7), _pixel_axis(28, 28), _pixel_axis(2, 2)
    (True, False, False, True)
    """
    return ow < MAX_TILE_ROWS and \
        largest_divisor(oh * ow, MAX_TILE_ROWS) > largest_divisor(ow, MAX_TILE_ROWS)


def depthwise_fed(mod: Any) -> list[Any]:
    """The weights (constants) of the convs whose result only a depthwise conv reads.

    Followed through the single-reader elementwise ops between them (bias
    ``add``, ReLU, ``clip``, HardSwish's ops: calls whose first argument is
    the result and whose output has its shape), in ``mod``'s ``main`` before
    legalization. Such a conv keeps a short block (72 channels: 8 of 16
    lanes) rather than padded filters (:func:`_padded_block`), so that its
    output and the depthwise conv's input agree and are handed over in
    blocks (:mod:`farm.jobs.cpu_schedules.handoff`): MobileNetV3-small's 1x1
    16 -> 72 on 56 x 56 and the depthwise conv after it, 1 thread, AVX-512,
    0.13 + 0.08 ms padded, 0.10 + 0.05 ms so (docs/benchmarks.md).
    """
    from tvm import relax

    if "main" not in [gv.name_hint for gv in mod.functions]:
        return []
    values: dict[Any, Any] = {}
    readers: dict[Any, list[Any]] = {}
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            values[binding.var] = binding.value
            if isinstance(binding.value, relax.Call):
                for arg in binding.value.args:
                    if isinstance(arg, relax.Var):
                        readers.setdefault(arg, []).append(binding.var)
    fed = []
    for var, value in values.items():
        if not _is_conv(value, depthwise=False):
            continue
        shape = _shape_of(value)
        current = var
        while len(readers.get(current, [])) == 1:
            reader = readers[current][0]
            call = values[reader]
            if _is_conv(call, depthwise=True) and call.args[0].same_as(current):
                fed.append(value.args[1])
                break
            if not (isinstance(call, relax.Call) and call.args
                    and call.args[0].same_as(current) and _shape_of(call) == shape):
                break
            current = reader
    return fed


def _shape_of(expr: Any) -> list[int] | None:
    try:
        return [int(d) for d in expr.ty.shape.values]
    except (AttributeError, TypeError):
        return None


def _is_conv(value: Any, depthwise: bool) -> bool:
    """Whether ``value`` is a ``conv2d`` call by a constant weight, depthwise or not."""
    import tvm
    from tvm import relax

    if not (isinstance(value, relax.Call) and getattr(value.op, "name", "") == "relax.nn.conv2d"
            and isinstance(value.args[1], tvm.ir.GenericConst)):
        return False
    groups = int(value.attrs.groups)
    return (groups > 1) if depthwise else groups == 1


def _conv_of(call: Any, short_block: bool = False) -> _Conv | None:
    """The conv's plan, or None where TVM's own legalization is kept.

    ``short_block``: a block short of the lanes is kept rather than padded
    (:func:`depthwise_fed`).
    """
    attrs = call.attrs
    try:
        n, c, h, w = (int(d) for d in call.args[0].ty.shape.values)
        o, i_per_group, kh, kw = (int(d) for d in call.args[1].ty.shape.values)
    except (AttributeError, TypeError):
        return None
    groups = int(attrs.groups)
    depthwise = groups == c == o and i_per_group == 1
    if (attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW"
            or attrs.out_layout != "NCHW" or (groups != 1 and not depthwise)
            or str(call.args[0].ty.dtype) != "float32"):
        return None
    lanes = target_lanes(current_target())
    ob = _block(o, lanes, min(lanes, 8))
    op = o
    if not depthwise and (ob is None or (ob < lanes and not short_block)):
        ob, op = _padded_block(o, lanes, ob)
    if ob is None:
        return None
    ib = ob if depthwise else 1
    top, left, bottom, right = (int(v) for v in attrs.padding)
    sy, sx = (int(v) for v in attrs.strides)
    dy, dx = (int(v) for v in attrs.dilation)
    conv = _Conv(n, c, h, w, o, kh, kw, depthwise, ob, op, ib, (sy, sx), (dy, dx),
                 (top, left, bottom, right))
    if not depthwise and _pixel_axis(*conv.out_hw):
        return replace(conv, pixels=True)
    return conv


def _pack_data(conv: _Conv, data: Any) -> Any:
    """TE: the padded input in blocks of ``ib`` channels, [N, C/ib, H', W', ib].

    A block of the depthwise conv's own function (not a kernel of its own):
    :class:`farm.jobs.cpu_schedules.TiledReduction` computes it one channel
    block at a time inside the conv's parallel loop, so the copy of a block
    (114 x 114 x 16 floats, 0.8 MB, for MobileNetV2's 112 x 112 layers) is read
    back from cache rather than written out to memory for a second kernel.
    """
    from tvm import te, tirx

    top, left, bottom, right = conv.padding

    def value(b: Any, co: Any, y: Any, x: Any, ci: Any) -> Any:
        inside = tirx.all(y >= top, y < top + conv.h, x >= left, x < left + conv.w)
        return tirx.if_then_else(inside, data[b, co * conv.ib + ci, y - top, x - left],
                                 tirx.const(0.0, data.dtype))

    return te.compute((conv.n, conv.c // conv.ib, conv.h + top + bottom,
                       conv.w + left + right, conv.ib), value, name=DEPTHWISE_PACK)


def _blocked_conv(conv: _Conv) -> Any:
    """TE: the conv on blocks, [N, O/ob, OH, OW, ob], unpacked to NCHW as its epilogue."""
    from tvm import te, topi

    oh, ow = conv.out_hw
    (sy, sx), (dy, dx) = conv.strides, conv.dilation
    ry = te.reduce_axis((0, conv.kh), name="ry")
    rx = te.reduce_axis((0, conv.kw), name="rx")

    def compute(packed: Any, weight: Any) -> Any:
        if conv.depthwise:
            packed = _pack_data(conv, packed)
            blocks = te.compute(
                (conv.n, conv.o // conv.ob, oh, ow, conv.ob),
                lambda b, oo, y, x, oi: te.sum(
                    packed[b, oo, y * sy + ry * dy, x * sx + rx * dx, oi]
                    * weight[oo, ry, rx, oi], axis=[ry, rx]),
                name=DEPTHWISE_CONV)
        else:
            # The NCHW input, padded in a nest of this kernel: the register tile takes one
            # input value at a time (a broadcast), so a copy into channel blocks would be
            # a kernel of its own for nothing.
            top, left, bottom, right = conv.padding
            padded = packed if not any(conv.padding) else topi.nn.pad(
                packed, (0, 0, top, left), (0, 0, bottom, right), name="conv2d_pad")
            rc = te.reduce_axis((0, conv.c), name="rc")
            if conv.pixels:
                pixels = te.compute(
                    (conv.n, conv.op // conv.ob, oh * ow, conv.ob),
                    lambda b, oo, p, oi: te.sum(
                        padded[b, rc, p // ow * sy + ry * dy, p % ow * sx + rx * dx]
                        * weight[oo, rc, ry, rx, oi], axis=[rc, ry, rx]),
                    name=PIXELS_CONV)
                return te.compute(
                    (conv.n, conv.o, oh, ow),
                    lambda b, oc, y, x: pixels[b, oc // conv.ob, y * ow + x, oc % conv.ob],
                    name="conv2d_unpack")
            blocks = te.compute(
                (conv.n, conv.op // conv.ob, oh, ow, conv.ob),
                lambda b, oo, y, x, oi: te.sum(
                    padded[b, rc, y * sy + ry * dy, x * sx + rx * dx]
                    * weight[oo, rc, ry, rx, oi], axis=[rc, ry, rx]),
                name=BLOCKED_CONV)
        return te.compute((conv.n, conv.o, oh, ow),
                          lambda b, oc, y, x: blocks[b, oc // conv.ob, y, x, oc % conv.ob],
                          name="conv2d_unpack")

    return compute


def legalize_conv2d(bb: Any, call: Any, fed: Sequence[Any] = ()) -> Any:
    """conv2d NCHW/OIHW in channel blocks, as onnxruntime's NCHWc; else TVM's legalization.

    ``fed``: :func:`depthwise_fed`'s weights; a conv by one keeps a short block.
    """
    import numpy as np
    import tvm
    from tvm import relax
    from tvm.relax.transform.legalize_ops.nn import _nn_conv2d

    conv = _conv_of(call, any(call.args[1].same_as(w) for w in fed))
    if conv is None:
        return _nn_conv2d(bb, call)
    shape, axes = conv.weight_order
    if conv.op > conv.o:
        if not isinstance(call.args[1], tvm.ir.expr.Constant):
            return _nn_conv2d(bb, call)  # a computed weight: padding it is not worth a kernel
        array = call.args[1].value.numpy()  # zero filters to whole vector blocks; never unpacked
        array = np.concatenate([array, np.zeros((conv.op - conv.o, *array.shape[1:]),
                                                array.dtype)])
        weight = packed_weight(bb, relax.const(array), axes, shape)
    else:
        weight = packed_weight(bb, call.args[1], axes, shape)
    return bb.call_te(_blocked_conv(conv), call.args[0], weight, primfunc_name_hint="conv2d")


def packed_weight(bb: Any, weight: Any, axes: tuple[int, ...],
            shape: tuple[int, ...] | None = None) -> Any:
    """``weight`` reshaped to ``shape`` (if given) and transposed by ``axes``.

    A constant is packed here with numpy (``FoldConstant`` would build and run
    a kernel per weight: 3x the build); a computed weight by Relax ops.
    """
    import numpy as np
    import tvm
    from tvm import relax

    if isinstance(weight, tvm.ir.expr.Constant):
        array = weight.value.numpy()
        array = array.reshape(shape) if shape is not None else array
        return relax.const(np.ascontiguousarray(array.transpose(axes)))
    if shape is not None:
        weight = relax.op.reshape(weight, shape)
    return bb.emit(relax.op.permute_dims(weight, axes))


def target_lanes(target: Any) -> int:
    """The target's float32 lanes; 4 (NEON's) where no target is current."""
    from farm.jobs.cpu_schedules.common import vector_lanes

    return vector_lanes(target) if target is not None else 4


def current_target() -> Any:
    """The target of the pass context, or None."""
    import tvm

    return tvm.target.Target.current(allow_none=True)
