"""What a register tile reads and writes around it: a depthwise conv's blocked copy, the write-back.

Helpers of :class:`farm.jobs.cpu_schedules.TiledReduction` (``rules.py``) for
the blocks before and after its main reduction: a padded copy in channel
blocks computed one block at a time inside the conv's parallel loop, and the
tile's write-back to the output vectorized along the output's contiguous axis.

A conv's NCHW padding copy is a nest of its own (LLVM vectorizes its rows,
:func:`farm.jobs.cpu_schedules.common.schedule_spatial`). Computed per tile
inside the parallel loop instead, as an earlier round did for 3x3 stride-2
convs, it ran 3-11% slower on each such zoo conv (1 thread, AVX-512, see
docs/benchmarks.md's history): the per-tile window's 17 columns took conditional loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from farm.jobs.cpu_schedules.common import extent, has_condition, vars_of, vectorize_tail

if TYPE_CHECKING:
    from farm.jobs.cpu_schedules.plan import TilePlan

__all__ = ["blocked_producer", "write_back"]


def blocked_producer(sch: Any, main: Any, plan: TilePlan,
                     cores: int = 1) -> tuple[Any, int] | None:
    """(producer, k): a padding block to compute per step of ``main``'s first k loops, or None.

    The first ``k`` spatial loops of ``main`` each index a dimension of the
    producer's buffer directly (a depthwise conv's padded copy in channel
    blocks, ``packed[n, c_block, y + ry, x + rx, c]``: k = 2), so computing the
    producer inside those loops writes each element once and the conv reads
    the block back from cache. None when there is no such producer, when k
    leaves no loop to run inside it, or when the k loops run fewer than 2
    times (batch 1 of a conv over all input channels: the copy stays whole)
    or fewer times than ``cores`` (the target's ``num-cores``): the k loops
    are then the only parallel ones, and MobileNetV2's first depthwise conv
    (2 blocks of 16 channels) would keep 2 of a phone's 8 cores busy.
    """
    stmt = sch.get(main)
    iv_vars = [iv.var for iv in stmt.iter_vars]
    loops = sch.get_loops(main)
    for producer in sch.get_producers(main):
        if not has_condition(sch, producer):
            continue
        buffer = sch.get(producer).writes[0].source
        reads = [r for r in stmt.reads if r.source.same_as(buffer)]
        if len(reads) != 1:
            continue
        direct = [r.min for r in reads[0].region]
        k = 0
        while k < len(plan.spatial) and any(iv_vars[plan.spatial[k]].same_as(m) for m in direct):
            k += 1
        runs = 1
        for i in plan.spatial[:k]:
            runs *= extent(sch, loops[i]) or 1
        if 0 < k < len(plan.spatial) and runs >= max(2, cores):
            return producer, k
    return None


def write_back(sch: Any, local: Any, lanes: int) -> None:
    """Vectorize the tile's write-back along the output's contiguous axis.

    A conv in channel blocks accumulates ``[pixels, channels]`` with the
    channels as the vector, but writes NCHW, where the channels are a plane
    apart: vectorized over channels, the write-back is a scatter of one store
    per element. Where another loop of the write-back indexes the output's
    last (contiguous) axis, it goes innermost and is vectorized, and the
    channel loop is unrolled, so LLVM transposes the tile in registers and
    stores whole rows (a 1x1 conv 16 -> 96 channels on 112 x 112 pixels, 1
    thread, AVX-512: see docs/benchmarks.md's history). A predicated write-back keeps
    its loop order (:func:`_predicated_rows`). Otherwise as
    :func:`farm.jobs.cpu_schedules.common.vectorize_tail`.
    """
    from tvm import s_tir

    stmt = sch.get(local)
    loops = sch.get_loops(local)
    n = len(stmt.iter_vars)
    own = loops[-n:] if len(loops) >= n else []
    last = vars_of(stmt.writes[0].region[-1].min)
    rows = [i for i, iv in enumerate(stmt.iter_vars)
            if iv.var in last and 2 <= (extent(sch, own[i]) or 0) <= 2 * lanes] if own else []
    if not rows or rows[-1] == n - 1 or (extent(sch, own[-1]) or 0) > 2 * lanes:
        vectorize_tail(sch, local, lanes)
        return
    row = _row_loops(sch, own, rows, lanes)
    try:
        sch.reorder(*[loop for i, loop in enumerate(own) if i not in row], *[own[i] for i in row])
    except (s_tir.schedule.ScheduleError, RuntimeError):
        _predicated_rows(sch, local, own, rows[-1], lanes)
        return
    sch.unroll(own[-1])
    sch.vectorize(sch.fuse(*[own[i] for i in row]) if len(row) > 1 else own[row[0]])


def _row_loops(sch: Any, own: list[Any], rows: list[int], lanes: int) -> list[int]:
    """The write-back loops to store as one vector: those indexing the output's last axis.

    All of them, in order, where their extents multiply to at most two
    registers' lanes (a transposed conv in ``[.., W, sw, O]`` writes column
    ``x * sw + kx``: the tile's 8 ``x`` by 2 ``kx`` are 16 adjacent floats,
    :func:`farm.jobs.cpu_schedules.legalize._shuffled`); else the
    innermost one.
    """
    total = 1
    for i in rows:
        total *= extent(sch, own[i]) or 0
    return rows if total <= 2 * lanes else rows[-1:]


def _predicated_rows(sch: Any, local: Any, own: list[Any], row: int, lanes: int) -> None:
    """Store whole rows from a write-back that TVM cannot reorder (channels padded to vectors).

    A conv whose output channels are padded with zero filters to whole
    vectors (72 -> 80, :func:`farm.jobs.cpu_schedules.legalize._padded_block`)
    writes back under a predicate on the channel (``c < 72``), and TVM's
    ``reorder`` refuses loops whose binding is predicated. Left with the
    channel vector, each element went to its own plane: MobileNetV3-small's
    1x1 conv 16 -> 72 channels on 56 x 56 ran 2.1x onnxruntime's time (0.27
    against 0.13 ms, 1 thread, AVX-512), one scalar store per element. The row
    loop is vectorized where it stands, the channel loop inside it unrolled:
    each channel of the tile is one vector store along its row, and the
    predicate, which does not depend on the row, is one test per channel
    (0.19 ms, 1.2-1.3x onnxruntime, in the same runs). Else as
    :func:`farm.jobs.cpu_schedules.common.vectorize_tail`.
    """
    from tvm import s_tir

    between = own[row + 1:-1]
    if row == len(own) - 1 or any((extent(sch, loop) or 0) != 1 for loop in between):
        vectorize_tail(sch, local, lanes)
        return
    try:
        sch.vectorize(own[row])  # first: a refusal leaves the schedule as it was
    except (s_tir.schedule.ScheduleError, RuntimeError):
        vectorize_tail(sch, local, lanes)
        return
    sch.unroll(own[-1])
