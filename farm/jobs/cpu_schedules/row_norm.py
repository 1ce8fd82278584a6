"""Softmax and layer norm: row reductions with vector partial results.

TVM 0.27's ``dlight.cpu.Reduction`` (apache/tvm ``python/tvm/s_tir/dlight/
cpu/reduction.py``) runs each row's reductions (softmax's max and sum, layer
norm's sum and sum of squares) as one scalar ``max`` or ``+`` after another,
each waiting on the last: its docstring says rfactor "is incompatible with
compute_at when multiple blocks share the same spatial loop". It is not, if
the rfactor comes first: here each reduction's row loop is split by a
vector and split off by ``rfactor`` while its block is still at the root, so one
vector of partial results runs at a vector op a cycle and the partials are
combined once per row; then every block goes under the row loop as dlight
does (parallel rows, vectorized element-wise blocks). Element-wise blocks
read by one block are inlined into it (softmax's subtraction of the max into
its exponential); one read twice (the exponential: by the sum and the
normalization) is kept, as onnxruntime's MLAS softmax stores it
(``onnxruntime/core/mlas/lib/compute.cpp``). The zoo encoder's softmax over
``[1, 4, 128, 128]`` (1 thread, AVX-512): see docs/benchmarks.md.
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
    try_inline,
    vars_of,
    vector_lanes,
    vectorize_tail,
)

__all__ = ["RowNorm"]


class RowNorm(CPUScheduleRule):
    """Reductions over each row's last axis with element-wise blocks between (softmax, norms)."""

    def apply(self, func: Any, target: Any, _: bool) -> Any:
        """A schedule of ``func``, or None unless it is such a function."""
        from tvm import s_tir

        found = root_blocks(self, func, target)
        if found is None:
            return None
        sch, blocks = found
        reductions = [b for b in blocks if is_reduction(sch, b)]
        if len(blocks) < 2 or not reductions or is_reduction(sch, blocks[-1]):
            return None
        lanes = vector_lanes(target)
        rows = _rows(sch, blocks)
        if rows is None or any(not _row_reduction(sch, b, rows, lanes) for b in reductions):
            return None
        try:
            return _schedule(sch, rows, lanes, target_cores(target))
        except (s_tir.schedule.ScheduleError, RuntimeError):
            return None


def _rows(sch: Any, blocks: list[Any]) -> int | None:
    """How many leading loops every block shares as spatial (the rows), or None."""
    from tvm import tirx

    shared = None
    for block in blocks:
        kinds = [iv.iter_type for iv in sch.get(block).iter_vars]
        lead = next((i for i, k in enumerate(kinds) if k != tirx.IterVar.DataPar), len(kinds))
        if lead == 0 or len(sch.get_loops(block)) != len(kinds):
            return None
        shared = lead if shared is None else min(shared, lead)
    return shared


def _row_reduction(sch: Any, block: Any, rows: int, lanes: int) -> bool:
    """Whether ``block`` reduces one loop after the rows, of whole vectors, along the inputs.

    The loop must be whole vectors long (at least one) and read each input
    along its last, contiguous axis, so a vector of partials gathers nothing.
    """
    loops = sch.get_loops(block)
    if len(loops) != rows + 1:
        return False
    n = extent(sch, loops[-1])
    if n is None or n % lanes:
        return False
    stmt = sch.get(block)
    k = stmt.iter_vars[-1].var
    for read in stmt.reads:
        used = [vars_of(r.min) for r in read.region]
        if any(k in dim for dim in used[:-1]):
            return False
    return True


def _schedule(sch: Any, rows: int, lanes: int, cores: int) -> Any:
    """Inline, rfactor each reduction, then every block under the (parallel) row loop.

    ``cores``: the target's ``num-cores`` (:func:`farm.jobs.cpu_schedules.common.parallel`).
    """
    root = sch.get_sblock("root")
    for block in sch.get_child_blocks(root)[:-1]:
        if not is_reduction(sch, block) and len(sch.get_consumers(block)) == 1:
            try_inline(sch, block)  # else a block of its own, vectorized below
    partials = []
    for block in [b for b in sch.get_child_blocks(root) if is_reduction(sch, b)]:
        _, inner = sch.split(sch.get_loops(block)[-1], factors=[None, lanes])
        partials.append(sch.get(sch.rfactor(inner, factor_axis=rows)))
    blocks = sch.get_child_blocks(root)
    loops = sch.get_loops(blocks[-1])
    head = sch.fuse(*loops[:rows]) if rows > 1 else loops[0]
    parallel(sch, head, cores)
    for block in reversed(blocks[:-1]):
        sch.compute_at(block, head, preserve_unit_loops=True)
    for block in sch.get_child_blocks(head):
        if any(sch.get(block).same_as(p) for p in partials):
            # compute_at wrote the loops in the block's iterator order: the vector of
            # partials (spatial, at factor_axis) outside the row's chunks (reduction).
            vector, chunks = sch.get_loops(block)[-2:]
            sch.reorder(chunks, vector)
            sch.vectorize(vector)
            vectorize_tail(sch, sch.decompose_reduction(block, chunks), lanes)
        elif not is_reduction(sch, block):
            _vectorize_row(sch, block, lanes)
    return sch


def _vectorize_row(sch: Any, block: Any, lanes: int) -> None:
    """Vectorize an element-wise block's row by whole vectors (the row is whole vectors long)."""
    inner = sch.get_loops(block)[-1]
    n = extent(sch, inner) or 0
    if n > lanes and n % lanes == 0:
        _, inner = sch.split(inner, factors=[None, lanes])
    if n >= 2:
        sch.vectorize(inner)
