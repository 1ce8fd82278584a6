"""Graph-level optimization of an imported model, as onnxruntime's basic and extended levels.

Real exports (torch.onnx in eval mode with ``do_constant_folding=False``,
paddle2onnx, tf2onnx) leave ``BatchNormalization`` after each ``Conv``; TVM's
fusion (``FuseOps``) then gives every conv a kernel of its own and a second
kernel ``fused_batch_norm_...`` that reads the whole activation again for a
per-channel scale and shift. onnxruntime folds the normalisation into the
conv's weights first (``ConvBNFusion`` in ``onnxruntime/core/optimizer/
conv_bn_fusion.cc``, the "extended" level). :func:`optimize` does the same on
the Relax module, so that the conv's kernel carries the epilogue (bias, then
ReLU6 / HardSwish / HardSigmoid / a residual add, in whatever form the
exporter wrote it: ``FuseOps`` puts every elementwise op after a conv into
the conv's function, and farm's default conv schedule
(:class:`farm.jobs.cpu_schedules.TiledReduction`) runs it inline on each
finished tile). The passes, in order:

1. ``FoldBatchnormToConv2D`` (TVM's own, ``relax/transform/
   fold_batch_norm_to_conv2d_for_inference.py``): a conv with no bias, then
   batch norm; the common export.
2. :func:`fold_batch_norm` (farm's): what TVM's pass does not match: a conv
   with a bias (the ONNX frontend imports it as ``conv2d`` then ``add``) and
   ``MatMul`` / ``Gemm`` (``matmul`` by a constant weight, with or without a
   bias) followed by a batch norm over their last axis.
3. ``DecomposeOpsForInference`` (TVM's): any other batch norm becomes a
   per-channel multiply and add, which ``FoldConstant`` folds and
   ``FuseOps`` fuses into its producer.
4. ``RemoveRedundantReshape`` (TVM's): a ``Reshape`` to the shape its input
   already has, and a reshape of a reshape.
5. ``FoldConstant``, ``CanonicalizeBindings``, ``DeadCodeElimination``.

``Identity`` nodes need no pass: TVM's ONNX frontend maps each to its input.
onnxoptimizer's ``fuse_bn_into_conv`` works on the ONNX graph instead; it is
not used because it is a further dependency, would run before the
frontend's own simplification (:mod:`farm.jobs.onnx_import`) and handles
neither ``MatMul`` nor ``Gemm``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["GRAPH_PASSES_VERSION", "Optimized", "count_ops", "fold_batch_norm", "optimize"]

#: Joins the compile cache key of every build: bump it when :func:`optimize` changes what
#: it emits, so libraries built from older graphs are not reused.
GRAPH_PASSES_VERSION = "1"


@dataclass(frozen=True)
class Optimized:
    """A Relax module after :func:`optimize`, and what changed.

    Attributes:
        mod: the optimized ``IRModule``.
        passes: what each pass that changed the graph did, in order, e.g.
            ``("folded 27 BatchNormalization into Conv weights",
            "removed 1 no-op Reshape")``; empty when nothing changed.
    """

    mod: Any
    passes: tuple[str, ...]


def count_ops(mod: Any) -> Counter[str]:
    """How many calls of each Relax operator the Relax functions of ``mod`` make.

    Returns:
        op name -> count, e.g. ``{"relax.nn.conv2d": 32, "relax.nn.batch_norm": 27}``;
        ``call_tir`` calls count under ``"relax.call_tir"``.
    """
    import tvm
    from tvm import relax

    counts: Counter[str] = Counter()

    def visit(expr: Any) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            counts[str(expr.op.name)] += 1

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    return counts


def _scale_shift(bn: Any, gamma: Any, beta: Any, mean: Any, var: Any) -> tuple[Any, Any]:
    """The batch norm ``bn`` as ``y = x * scale + shift``, in float64: ``scale, shift: [C]``."""
    eps = float(bn.attrs["epsilon"])
    gamma64, beta64, mean64, var64 = (np.asarray(c.value.numpy(), np.float64)
                                      for c in (gamma, beta, mean, var))
    scale = gamma64 / np.sqrt(var64 + eps)
    return scale, beta64 - mean64 * scale


def fold_batch_norm(func: Any) -> Any:
    """``func`` with each batch norm after a conv with bias, or after a matmul, folded into it.

    Written for farm because TVM 0.27's ``FoldBatchnormToConv2D`` matches only
    ``batch_norm(conv2d(x, W))``: the ONNX frontend imports a ``Conv`` with a
    bias as ``add(conv2d(x, W), b)`` and ``Gemm`` / ``MatMul`` as ``matmul``,
    which it leaves alone. The weights are scaled in float64 and stored as
    float32, as onnxruntime's ``ConvBNFusion`` does in the weight's type.

    Matched, with every weight, bias and batch norm parameter a constant:

    - ``batch_norm(add(conv2d(x, W[O, I, kh, kw]), b[1, O, 1, 1]), axis=1)`` (OIHW kernel);
    - ``batch_norm(matmul(x, W[K, N]) [+ b[N]], axis=-1)`` (the last axis).

    Args:
        func: a ``relax.Function``.

    Returns:
        The rewritten function: ``conv2d(x, W * s) + (b * s + t)``, or
        ``matmul(x, W * s) + (b * s + t)``, where ``s, t`` are the batch norm's
        per-channel scale and shift.
    """
    from tvm import relax
    from tvm.relax.dpl import TupleGetItemPattern, is_const, is_op, rewrite_call, wildcard

    x, weight, bias = wildcard(), is_const(), is_const()
    conv = is_op("relax.nn.conv2d")(x, weight)
    matmul = is_op("relax.matmul")(x, weight)
    producer = is_op("relax.add")(conv | matmul, bias) | matmul
    params = [is_const() for _ in range(4)]
    bn = is_op("relax.nn.batch_norm")(producer, *params)
    pattern = TupleGetItemPattern(bn, 0)

    def rewrite(expr: Any, matches: dict[Any, Any]) -> Any:
        bn_call = matches[bn]
        w = np.asarray(matches[weight].value.numpy(), np.float64)
        out_ndim = len(bn_call.args[0].ty.shape)
        axis = int(bn_call.attrs["axis"]) % out_ndim
        scale, shift = _scale_shift(bn_call, *(matches[p] for p in params))
        if conv in matches:
            if matches[conv].attrs["kernel_layout"] != "OIHW" or axis != 1 or w.ndim != 4:
                return expr
            folded_w = w * scale[:, None, None, None]
            b = np.asarray(matches[bias].value.numpy(), np.float64).reshape(1, -1, 1, 1)
            new_b = b * scale[None, :, None, None] + shift[None, :, None, None]
            op_call = matches[conv]
        else:
            if w.ndim != 2 or axis != out_ndim - 1:
                return expr
            folded_w = w * scale[None, :]
            b = (np.asarray(matches[bias].value.numpy(), np.float64) if bias in matches
                 else np.zeros_like(shift))
            if b.size not in (1, shift.size):
                return expr
            new_b = b * scale + shift
            op_call = matches[matmul]
        dtype = matches[weight].value.dtype
        new_call = relax.Call(op_call.op, [matches[x], relax.const(folded_w.astype(dtype))],
                              op_call.attrs)
        return relax.op.add(new_call, relax.const(new_b.astype(dtype)))

    return rewrite_call(pattern, rewrite, func)


def optimize(mod: Any) -> Optimized:
    """``mod`` after the graph-level passes of this module, and what they changed.

    Args:
        mod: the Relax ``IRModule`` TVM's ONNX frontend imported, weights bound
            as constants.

    Returns:
        The optimized module and one line per pass that changed it.
    """
    import tvm
    from tvm import relax

    tidy = tvm.transform.Sequential([relax.transform.FoldConstant(),
                                     relax.transform.CanonicalizeBindings(),
                                     relax.transform.DeadCodeElimination()])
    steps = [
        # Gemm's transposed weight becomes a constant before the match.
        ("relax.nn.batch_norm", "folded {} BatchNormalization into Conv weights",
         tvm.transform.Sequential([tidy, relax.transform.FoldBatchnormToConv2D()])),
        ("relax.nn.batch_norm", "folded {} BatchNormalization into Conv/Gemm/MatMul weights",
         relax.transform.function_pass(opt_level=0)(
             lambda func, _mod, _ctx: fold_batch_norm(func))),
        ("relax.nn.batch_norm", "decomposed {} BatchNormalization into a scale and shift",
         relax.transform.DecomposeOpsForInference()),
        ("relax.reshape", "removed {} no-op Reshape", relax.transform.RemoveRedundantReshape()),
    ]
    passes = []
    for op, said, step in steps:
        before = count_ops(mod)[op]
        with tvm.transform.PassContext(opt_level=3):
            mod = step(mod)
        gone = before - count_ops(mod)[op]
        if gone > 0:
            passes.append(said.format(gone))
    with tvm.transform.PassContext(opt_level=3):
        mod = tidy(mod)
    return Optimized(mod, tuple(passes))

