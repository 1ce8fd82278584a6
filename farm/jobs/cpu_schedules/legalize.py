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
  followed by a pixel shuffle into place.
- ``sigmoid``: ``1 / (1 + fast_exp(-x))`` (TOPI's polynomial ``fast_exp``),
  which ``FastMathTransform`` does not cover; TVM's form calls libm's ``expf``
  per element.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cpu_legalize_map"]


def _conv2d_transpose(bb: Any, call: Any) -> Any:
    from tvm import te
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
    sh, sw = strides
    out_dtype = call.ty.dtype

    def compute(data: Any, weight: Any) -> Any:
        n, c, h, w = data.shape
        o = weight.shape[1]
        i = te.reduce_axis((0, c), name="i")
        # Output channels after the kernel offsets: TiledReduction tiles them in registers.
        blocks = te.compute(
            (n, sh, sw, o, h, w),
            lambda b, ky, kx, oc, y, x: te.sum(
                data[b, i, y, x].astype(out_dtype) * weight[i, oc, ky, kx].astype(out_dtype),
                axis=i),
            name="conv2d_transpose_blocks")
        return te.compute(
            (n, o, h * sh, w * sw),
            lambda b, oc, y, x: blocks[b, y % sh, x % sw, oc, y // sh, x // sw],
            name="conv2d_transpose_shuffle")

    return bb.call_te(compute, call.args[0], call.args[1], primfunc_name_hint="conv2d_transpose")


def _sigmoid(bb: Any, call: Any) -> Any:
    from tvm import topi

    def compute(x: Any) -> Any:
        one = topi.full_like(x, 1.0)
        return topi.divide(one, topi.add(one, topi.fast_exp(topi.negative(x))))

    return bb.call_te(compute, call.args[0], primfunc_name_hint="sigmoid")


def cpu_legalize_map() -> dict[str, Any]:
    """Relax operator name -> farm's legalization for CPU targets (see the module doc)."""
    return {"relax.nn.conv2d_transpose": _conv2d_transpose, "relax.sigmoid": _sigmoid}
