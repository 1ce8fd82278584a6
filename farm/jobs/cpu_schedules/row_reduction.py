"""Reductions over whole contiguous rows (global average pooling): vector partial sums.

A squeeze-excite block (MobileNetV3) starts with a global average pool,
which TVM legalizes as ``mean``: one sum per channel over its ``H x W``
plane, then a divide. :class:`farm.jobs.cpu_schedules.TiledReduction` has
no output axis to vectorize there (the output is ``[N, C, 1, 1]``), so the
sum ran one scalar add after another, each waiting on the last: MobileNetV3-
small's six ``mean`` kernels took 0.23 ms of its 2.7 ms (AVX-512, 1 thread),
onnxruntime's six GlobalAveragePool nodes 0.03 ms. Here the plane's loops
are fused into one (the plane is contiguous), split by a vector, and
``rfactor`` (TVM's ``Schedule.rfactor``) keeps one vector of partial sums
per row, added up at the end: the sum runs at one vector add a cycle. The
same run: ``mean`` over 16 x 56 x 56 0.054 -> 0.010 ms, 96 x 14 x 14 0.025 ->
0.007 ms, 576 x 7 x 7 0.021 -> 0.009 ms.
"""

from __future__ import annotations

from typing import Any

from tvm.s_tir.dlight.cpu.base import CPUScheduleRule

from farm.jobs.cpu_schedules.common import (
    extent,
    is_reduction,
    parallel,
    root_blocks,
    target_cores,
    vector_factor,
    vector_lanes,
    vectorize_tail,
)

__all__ = ["MIN_VECTOR", "RowReduction"]

#: Fewest partial sums worth a vector: a plane whose size has no divisor this large
#: (up to two registers) is left to :class:`farm.jobs.cpu_schedules.TiledReduction`.
MIN_VECTOR = 4


class RowReduction(CPUScheduleRule):
    """One reduction over its input's trailing, whole dimensions (a global pool, a row sum)."""

    def apply(self, func: Any, target: Any, _: bool) -> Any:
        """A schedule of ``func``, or None unless it is such a reduction and its consumers."""
        from tvm import s_tir

        found = root_blocks(self, func, target)
        if found is None:
            return None
        sch, blocks = found
        if not blocks or not is_reduction(sch, blocks[0]) \
                or any(is_reduction(sch, b) for b in blocks[1:]):
            return None
        main = blocks[0]
        reduce = _reduce_loops(sch, main)
        if reduce is None:
            return None
        lanes = vector_lanes(target)
        try:
            return _schedule(sch, main, blocks[1:], reduce, lanes, target_cores(target))
        except (s_tir.schedule.ScheduleError, RuntimeError):
            return None


def _reduce_loops(sch: Any, main: Any) -> list[int] | None:
    """Indices of ``main``'s reduction loops, or None where the rule does not fit.

    Fits where the loops are spatial then reduction (as legalization writes
    them) and the one input is read with the reduction variables, in order,
    as its trailing indices over their whole dimensions: the fused loop then
    walks that input's memory in order. (:class:`farm.jobs.cpu_schedules.
    TiledReduction` vectorizes no such function: its output axes index the
    input's leading dimensions, so a vector of outputs would gather.)
    """
    from tvm import tirx

    stmt = sch.get(main)
    loops = sch.get_loops(main)
    if len(loops) != len(stmt.iter_vars) or len(stmt.writes) != 1 \
            or any(extent(sch, loop) is None for loop in loops):
        return None
    kinds = [iv.iter_type for iv in stmt.iter_vars]
    spatial = [i for i, k in enumerate(kinds) if k == tirx.IterVar.DataPar]
    reduce = [i for i, k in enumerate(kinds) if k == tirx.IterVar.CommReduce]
    if not spatial or not reduce or len(spatial) + len(reduce) != len(kinds) \
            or max(spatial) > min(reduce):
        return None
    iv_vars = [iv.var for iv in stmt.iter_vars]
    output = stmt.writes[0].source
    inputs = [r for r in stmt.reads if not r.source.same_as(output)]
    if len(inputs) != 1:
        return None
    read = inputs[0]
    trailing = list(read.region)[-len(reduce):]
    if len(trailing) != len(reduce):
        return None
    shape = list(read.source.shape)[-len(reduce):]
    for dim, size, i in zip(trailing, shape, reduce, strict=True):
        if not dim.min.same_as(iv_vars[i]) or not isinstance(size, tirx.IntImm) \
                or int(size) != extent(sch, loops[i]):
            return None
    total = 1
    for i in reduce:
        total *= extent(sch, loops[i]) or 1
    return reduce if total >= MIN_VECTOR else None


def _schedule(sch: Any, main: Any, consumers: list[Any], reduce: list[int], lanes: int,
              cores: int) -> Any:
    """Fused row, vector partial sums (rfactor), outer loops parallel, consumers per row.

    Returns:
        The schedule, or None where the row has no divisor of at least
        :data:`MIN_VECTOR` lanes.
    """
    loops = sch.get_loops(main)
    n_spatial = len(loops) - len(reduce)
    row = sch.fuse(*[loops[i] for i in reduce]) if len(reduce) > 1 else loops[reduce[0]]
    factor = vector_factor(extent(sch, row) or 1, lanes)
    if factor < MIN_VECTOR:
        return None
    _, inner = sch.split(row, factors=[None, factor])
    partial = sch.rfactor(inner, factor_axis=n_spatial)
    outer = sch.get_loops(partial)[:n_spatial]
    head = sch.fuse(*outer) if len(outer) > 1 else outer[0]
    parallel(sch, head, cores)
    sch.reverse_compute_at(main, head, preserve_unit_loops=True)
    for block in consumers:
        sch.reverse_compute_at(block, head, preserve_unit_loops=True)
    # Vectorize before decompose_reduction: the update without its init is no
    # longer a reduction block, and TVM refuses to vectorize around it.
    sch.vectorize(sch.get_loops(partial)[-1])
    init = sch.decompose_reduction(partial, sch.get_loops(partial)[1])
    vectorize_tail(sch, init, lanes)
    return sch
