"""farm's legalization of ``matmul`` by a constant weight (dense layers, GEMV and GEMM), on CPU.

A classifier's ``[1, K] x [K, N]`` (ONNX ``Gemm`` with ``transB``, which TVM's
frontend imports as ``matmul(x, permute_dims(W))``): TVM's legalization reads
the ``[K, N]`` weight in place, so farm's default schedule
(:class:`farm.jobs.cpu_schedules.TiledReduction`, a vector of output columns
per parallel task, the reduction over ``K`` inside) steps ``N`` floats to a
new row for each vector of ``v`` floats it loads: MobileNetV2's
``1280 x 1000`` classifier took 2.6-2.9 ms of the untuned build's 14 ms
(about 1.7 GB/s; 1 thread, AVX-512). Here the weight is packed into column
blocks of a vector, ``[N'/v, K, v]`` (``N`` padded with zero columns to whole
vectors, ``N'``), by Relax ops on the weight that ``FoldConstant`` evaluates at
build time, so each output vector reads its ``K x v`` block as one contiguous
stream, as onnxruntime's MLAS packs ``B`` for its SGEMM. Only where the weight
is computed from constants (packing a weight given at run time would be a
kernel per inference).

With many rows (a transformer's ``[seq, dim] x [dim, 4 dim]``) the packed
weight also gives farm's register tile a third axis: the column blocks are
unrolled beside the tile's rows as a conv's output-channel blocks are
(:class:`farm.jobs.cpu_schedules.TiledReduction`), 8 rows x 2 vectors of
accumulators instead of 4 rows x 2 vectors reading a row of ``[K, N]``
``N`` floats apart. The zoo encoder's ``128 x 256 x 1024`` matmul + GELU ran
1.00 -> 0.65 ms, the whole untuned encoder 2.76 -> 2.32 ms (1.17x -> 0.99x
onnxruntime; 1 thread, AVX-512, docs/benchmarks.md's history).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PACKED_MAX_ROWS", "dense_legalize_map"]

#: Most rows (product of the left operand's leading dimensions) of a matmul whose constant
#: weight is packed; None: any. 0 switches the packing off (``bench/bench_cpu_defaults.py``
#: compares builds through it). Until 2026-11-27 it was 8 (a classifier or a short
#: sequence); the encoder's 128-row matmuls measured 0.65x their unpacked time.
PACKED_MAX_ROWS: int | None = None


def _from_constants(bb: Any, expr: Any, depth: int = 8) -> bool:
    """Whether ``expr`` is computed from constants only (FoldConstant folds it at build time).

    Follows the bindings ``bb`` has emitted so far, up to ``depth`` calls deep.
    """
    import tvm
    from tvm import relax

    if isinstance(expr, tvm.ir.expr.Constant):
        return True
    if isinstance(expr, relax.Var):
        binding = bb.lookup_binding(expr)
        return binding is not None and depth > 0 and _from_constants(bb, binding, depth - 1)
    if isinstance(expr, relax.Tuple):
        return all(_from_constants(bb, field, depth) for field in expr.fields)
    if isinstance(expr, relax.Call):
        tensors = [a for a in expr.args if not isinstance(a, relax.GlobalVar | relax.ShapeExpr)]
        return bool(tensors) and all(_from_constants(bb, a, depth) for a in tensors)
    return False


def _matmul(bb: Any, call: Any) -> Any:
    """Rows by a constant ``[K, N]`` weight packed in column blocks (see the module doc)."""
    import tvm
    from tvm import relax, te
    from tvm.relax.transform.legalize_ops.linear_algebra import _matmul as tvm_matmul

    from farm.jobs.cpu_schedules.common import vector_lanes

    data, weight = call.args
    try:
        lhs = [int(d) for d in data.ty.shape.values]
        k, n = (int(d) for d in weight.ty.shape.values)
    except (AttributeError, TypeError, ValueError):
        return tvm_matmul(bb, call)
    rows = 1
    for d in lhs[:-1]:
        rows *= d
    if (len(lhs) < 2 or lhs[-1] != k or (PACKED_MAX_ROWS is not None and rows > PACKED_MAX_ROWS)
            or str(data.ty.dtype) != "float32" or str(weight.ty.dtype) != "float32"
            or not _from_constants(bb, weight)):
        return tvm_matmul(bb, call)
    target = tvm.target.Target.current(allow_none=True)
    lanes = vector_lanes(target) if target is not None else 4
    padded = -(-n // lanes) * lanes
    if padded != n:
        weight = relax.op.nn.pad(weight, [0, 0, 0, padded - n])
    packed = bb.emit(relax.op.permute_dims(
        relax.op.reshape(weight, (k, padded // lanes, lanes)), [1, 0, 2]))
    out_dtype = call.ty.dtype

    def compute(x: Any, w: Any) -> Any:
        flat = te.compute((rows, k), lambda r, c: x(*_unflatten(r, lhs[:-1]), c),
                          name="matmul_rows")
        rk = te.reduce_axis((0, k), name="k")
        blocks = te.compute(
            (rows, padded // lanes, lanes),
            lambda r, jo, ji: te.sum(flat[r, rk].astype(out_dtype) * w[jo, rk, ji].astype(
                out_dtype), axis=rk),
            name="matmul_blocks")
        return te.compute(
            (*lhs[:-1], n),
            lambda *idx: blocks[_flatten(idx[:-1], lhs[:-1]), idx[-1] // lanes,
                                idx[-1] % lanes],
            name="matmul_unpack")

    return bb.call_te(compute, data, packed, primfunc_name_hint="matmul")


def _unflatten(r: Any, dims: list[int]) -> list[Any]:
    """Row index ``r`` of ``prod(dims)`` -> an index per dimension (row-major)."""
    out = []
    for d in reversed(dims):
        out.append(r % d)
        r = r // d
    return list(reversed(out))


def _flatten(idx: Any, dims: list[int]) -> Any:
    """An index per dimension -> the row-major row index."""
    r = 0
    for i, d in zip(idx, dims, strict=True):
        r = r * d + i
    return r


def dense_legalize_map() -> dict[str, Any]:
    """Relax operator name -> farm's legalization for CPU targets (see the module doc)."""
    return {"relax.matmul": _matmul}
