"""farm's legalization of Relax operators for CPU builds, where TVM's TOPI form runs slow.

Passed to ``relax.transform.LegalizeOps(customize_legalize_map=...)`` by
:func:`farm.jobs.cpu_schedules.build.fuse_passes`; every call these do not
cover goes to TVM's own legalization.

- ``nn.conv2d_transpose`` whose kernel equals its stride (no padding, no
  dilation, one group: the 2x2 stride-2 upsampling of U-Net and DBNet heads).
  TOPI dilates the input with zeros and runs a full convolution over it
  (``group_conv2d_transpose_nchw``), so three of four multiply-adds are by
  zero; the zoo's detection head spent 1.3 of its 3.2 ms there, onnxruntime
  0.12 ms. With kernel == stride every input pixel feeds its own ``s x s``
  block of outputs, so the operator is a 1x1 convolution to ``O x s x s``
  channels (one reduction over input channels, which
  :class:`farm.jobs.cpu_schedules.TiledReduction` tiles like any 1x1 conv)
  followed by a pixel shuffle into place; channels last where they fill a
  vector, so that the shuffle stores whole rows (:func:`_shuffled`).
- ``nn.conv2d`` (NCHW, float32, one group or depthwise) whose output
  channels split into blocks of a vector (a power of two, at most the
  target's lanes, at least 8 or the lanes): in channel blocks, as
  onnxruntime's MLAS runs it (NCHWc). The weight is packed once (the model's
  weights are constants: packed here with numpy, as ``OIHW{o}o``), the
  input is read as it is (NCHW; a depthwise conv's input is first copied
  into channel blocks with its padding, one block at a time in the conv's
  own function, so that each tap reads a vector of channels), and the
  convolution's output channels of a block are the innermost axis, so
  :class:`farm.jobs.cpu_schedules.TiledReduction` vectorizes over channels
  and tiles the output row, whatever the image width (in NCHW it vectorized
  over the width: 10 lanes of 16 for 40 or 20 pixels, 4 for ResNet's last
  4x4 layers); the conv's epilogue writes NCHW back from the register tile,
  so the graph around it is unchanged. Same run, 1 thread, pinned, host load
  10: ResNet-18 1.31x -> 0.96x onnxruntime, MobileNetV2 1.21x -> 0.97x,
  MobileNetV3-small 2.37x -> 1.89x. Output channels that give blocks short
  of the lanes (72 of 16 lanes: blocks of 8) or none (60) are padded with
  zero filters to whole vectors where that uses more of each vector
  (:func:`_padded_block`; not for depthwise convs, whose input copy would
  need padded channels too, nor computed weights, nor a conv whose result
  only a depthwise conv reads: :func:`depthwise_fed`).
- ``sigmoid``: ``1 / (1 + fast_exp(-x))`` (TOPI's polynomial ``fast_exp``),
  which ``FastMathTransform`` does not cover; TVM's form calls libm's ``expf``
  per element.
- ``nn.max_pool2d`` (NCHW, float32) in channel blocks, its padded input
  copied as a depthwise conv's is (:mod:`farm.jobs.cpu_schedules.legalize_pool`).
- ``image.resize2d``, nearest, by whole factors: ``data[.., y // s, x // s]``
  (:func:`_resize2d`), whose repeats the injective schedule unrolls.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from farm.jobs.cpu_schedules.legalize_conv import (
    BLOCKED_CONV,
    DEPTHWISE_CONV,
    DEPTHWISE_PACK,
    _block,
    current_target,
    depthwise_fed,
    legalize_conv2d,
    packed_weight,
    target_lanes,
)
from farm.jobs.cpu_schedules.legalize_pool import legalize_max_pool2d

__all__ = ["BLOCKED_CONV", "DEPTHWISE_CONV", "DEPTHWISE_PACK", "cpu_legalize_map",
           "depthwise_fed"]


def _conv2d_transpose(bb: Any, call: Any) -> Any:
    from tvm.relax.transform.legalize_ops.nn import _nn_conv2d_transpose

    attrs = call.attrs
    weight_shape = call.args[1].ty.shape
    try:
        kernel = [int(k) for k in weight_shape.values[2:]]
    except (AttributeError, TypeError):
        return _nn_conv2d_transpose(bb, call)
    strides = [int(s) for s in attrs.strides]
    if (attrs.data_layout != "NCHW" or attrs.kernel_layout != "IOHW"
            or attrs.out_layout != "NCHW" or int(attrs.groups) != 1
            or any(int(p) for p in attrs.padding) or any(int(p) for p in attrs.output_padding)
            or any(int(d) != 1 for d in attrs.dilation) or kernel != strides):
        return _nn_conv2d_transpose(bb, call)
    o = int(weight_shape.values[1])
    target = current_target()
    lanes = target_lanes(target)
    channels_last = _block(o, lanes, min(lanes, 8)) is not None
    weight = packed_weight(bb, call.args[1], (0, 2, 3, 1)) if channels_last else call.args[1]
    return bb.call_te(_shuffled(strides, str(call.ty.dtype), channels_last), call.args[0],
                      weight, primfunc_name_hint="conv2d_transpose")


def _shuffled(strides: list[int], out_dtype: str, channels_last: bool) -> Any:
    """TE of a kernel == stride transposed conv: a 1x1 conv to ``O x sh x sw`` blocks, shuffled.

    ``channels_last``: blocks ``[N, sh, H, W, sw, O]`` from a weight packed
    ``[I, kh, kw, O]``. :class:`farm.jobs.cpu_schedules.TiledReduction` takes
    the output channels as the vector, input pixels of the row as the tile
    and the ``sw`` column offsets as its channel blocks (the weight's vector
    depends on them, the input pixel does not), so each input value serves
    ``sw`` vectors, and the tile's ``W x sw`` outputs of one channel are
    ``sw * W`` adjacent floats of an output row, which the write-back
    (:func:`farm.jobs.cpu_schedules.tile_io.write_back`) stores as one vector.
    det_head's 16 -> 16 on 40 x 40 (+ReLU), 1 thread, AVX-512: 0.101 ->
    0.057 ms (docs/benchmarks.md's history). Else blocks ``[N, sh, sw, O, H, W]`` from
    the IOHW weight: output channels as the register tile, the input row as
    the vector, written back by a stride-``sw`` scatter; kept where the
    output channels give no vector (det_head's last layer, 16 -> 1).
    """
    from tvm import te

    sh, sw = strides

    def compute(data: Any, weight: Any) -> Any:
        n, c, h, w = data.shape
        o = weight.shape[3] if channels_last else weight.shape[1]
        i = te.reduce_axis((0, c), name="i")

        def product(b: Any, ky: Any, kx: Any, oc: Any, y: Any, x: Any) -> Any:
            tap = weight[i, ky, kx, oc] if channels_last else weight[i, oc, ky, kx]
            return te.sum(data[b, i, y, x].astype(out_dtype) * tap.astype(out_dtype), axis=i)

        if channels_last:
            blocks = te.compute((n, sh, h, w, sw, o),
                                lambda b, ky, y, x, kx, oc: product(b, ky, kx, oc, y, x),
                                name="conv2d_transpose_blocks")
            return te.compute(
                (n, o, h * sh, w * sw),
                lambda b, oc, y, x: blocks[b, y % sh, y // sh, x // sw, x % sw, oc],
                name="conv2d_transpose_shuffle")
        blocks = te.compute((n, sh, sw, o, h, w), product, name="conv2d_transpose_blocks")
        return te.compute(
            (n, o, h * sh, w * sw),
            lambda b, oc, y, x: blocks[b, y % sh, x % sw, oc, y // sh, x // sw],
            name="conv2d_transpose_shuffle")

    return compute


def _sigmoid(bb: Any, call: Any) -> Any:
    from tvm import topi

    def compute(x: Any) -> Any:
        one = topi.full_like(x, 1.0)
        return topi.divide(one, topi.add(one, topi.fast_exp(topi.negative(x))))

    return bb.call_te(compute, call.args[0], primfunc_name_hint="sigmoid")


def _resize2d(bb: Any, call: Any) -> Any:
    """Nearest upsampling by whole factors as ``data[n, c, y // sy, x // sx]``; else TVM's.

    Only NCHW, ``nearest_neighbor``, ``asymmetric`` coordinates and ``floor``
    rounding (ONNX ``Resize`` with ``nearest_mode="floor"``, as the FPN of
    :mod:`farm.zoo.detect` writes it), where the output size is a whole
    multiple of the input's: the source pixel is then ``floor(y * h / oh)
    = y // sy`` exactly. TOPI's form clamps a truncating division per element,
    which hides the repetition from
    :func:`farm.jobs.cpu_schedules.common.schedule_spatial`.
    """
    from tvm import te
    from tvm.relax.transform.legalize_ops.image import _image_resize2d

    attrs = call.attrs
    factors = _whole_factors(call)
    if (factors is None or attrs.layout != "NCHW" or attrs.method != "nearest_neighbor"
            or attrs.coordinate_transformation_mode != "asymmetric"
            or attrs.rounding_method != "floor"
            or (attrs.out_dtype is not None and str(attrs.out_dtype) not in ("", "void",
                                                                             str(call.ty.dtype)))):
        return _image_resize2d(bb, call)
    sy, sx = factors
    n, c, h, w = (int(d) for d in call.args[0].ty.shape.values)
    return bb.call_te(lambda data: te.compute((n, c, h * sy, w * sx),
                                              lambda b, ch, y, x: data[b, ch, y // sy, x // sx],
                                              name="resize"),
                      call.args[0], primfunc_name_hint="resize2d")


def _whole_factors(call: Any) -> tuple[int, int] | None:
    """(sy, sx): the output's height and width over the input's, both whole; else None."""
    try:
        _, _, h, w = (int(d) for d in call.args[0].ty.shape.values)
        oh, ow = (int(d) for d in call.ty.shape.values[2:])
    except (AttributeError, TypeError, ValueError):
        return None
    if h <= 0 or w <= 0 or oh % h or ow % w:
        return None
    return oh // h, ow // w


def cpu_legalize_map(fed: Sequence[Any] = ()) -> dict[str, Any]:
    """Relax operator name -> farm's legalization for CPU targets (see the module doc).

    Args:
        fed: :func:`depthwise_fed` of the module to legalize.
    """
    return {"relax.nn.conv2d_transpose": _conv2d_transpose, "relax.sigmoid": _sigmoid,
            "relax.nn.conv2d": functools.partial(legalize_conv2d, fed=fed),
            "relax.image.resize2d": _resize2d, "relax.nn.max_pool2d": legalize_max_pool2d}
