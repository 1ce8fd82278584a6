"""farm's default CPU schedules as dlight rules: what an untuned CPU build runs.

TVM 0.27 schedules nothing in its CPU pipeline (``relax/backend/cpu_generic/
pipeline.py``) and ``dlight.cpu`` has only ``GEMV`` and ``Reduction``; the
loops TVM's legalization writes run one element at a time on one core. These
rules give every fused function a plain, fast-enough schedule, the way
TVM's hand-written x86 schedules did before Relax (parallel outer loops,
vectorized inner loops, a register tile of outputs per inner loop):

- :class:`TiledReduction`: one multiply-accumulate or pooling block
  (``conv2d_nchw``, ``group_conv2d_nchw``, ``matmul``, ``pool_max``), with
  producers (padding) and consumers (bias, activation) in the same function.
  The output's innermost axis is vectorized; a second output axis that one
  input does not depend on (output channels of a conv, rows of a matmul) is
  unrolled as a register tile, so each vector load of that input serves the
  whole tile; the accumulators live in a local buffer that LLVM keeps in
  registers; the outer output loops are fused into one parallel loop, and
  the consumers run inline on each finished tile.
- :class:`Injective`: only spatial blocks (elementwise, transpose, resize).
- :class:`ParallelFallback`: anything else, block by block.

Softmax and layer norm are left to ``dlight.cpu.Reduction`` (see
:func:`farm.jobs.cpu_schedules.default_rules` for the order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tvm.s_tir.dlight.cpu.base import CPUScheduleRule

from farm.jobs.cpu_schedules.common import (
    extent,
    has_condition,
    is_reduction,
    largest_divisor,
    schedule_spatial,
    try_inline,
    vector_factor,
    vector_lanes,
)

#: Most rows of a register tile of one vector register a row (half that for two).
#: Measured with AVX-512 on a pinned core: 8 rows of 14 lanes ran a 1x1 conv on
#: 28x28 in 0.058 ms, 4 rows in 0.081 ms; 8 rows of 2x16 lanes were no faster.
MAX_TILE_ROWS = 8


def _vars_of(expr: Any) -> set[Any]:
    from tvm.tirx.analysis import undefined_vars

    return set(undefined_vars(expr))


@dataclass(frozen=True)
class _Plan:
    """How :class:`TiledReduction` tiles the main block.

    Attributes:
        spatial: indices of the spatial loops, in order.
        reduce: indices of the reduction loops, in order.
        vector: index of the vectorized spatial loop, or None.
        vector_factor: its inner extent.
        tile: index of the register-tiled spatial loop, or None.
        tile_factor: its inner extent.
    """

    spatial: list[int]
    reduce: list[int]
    vector: int | None
    vector_factor: int
    tile: int | None
    tile_factor: int


def _plan(sch: Any, block: Any, lanes: int) -> _Plan | None:
    """The tiling of a reduction block, or None if its loops are not as legalization writes them."""
    from tvm import tirx

    stmt = sch.get(block)
    loops = sch.get_loops(block)
    if len(loops) != len(stmt.iter_vars) or any(extent(sch, loop) is None for loop in loops):
        return None
    kinds = [iv.iter_type for iv in stmt.iter_vars]
    spatial = [i for i, k in enumerate(kinds) if k == tirx.IterVar.DataPar]
    reduce = [i for i, k in enumerate(kinds) if k == tirx.IterVar.CommReduce]
    if not spatial or not reduce or max(spatial) > min(reduce) or len(stmt.writes) != 1:
        return None
    iv_vars = [iv.var for iv in stmt.iter_vars]
    out_last = _vars_of(stmt.writes[0].region[-1].min)
    vector = None
    for i in reversed(spatial):
        if extent(sch, loops[i]) > 1 and iv_vars[i] in out_last:  # type: ignore[operator]
            vector = i
            break
    if vector is None:
        return _Plan(spatial, reduce, None, 1, None, 1)
    v_var = iv_vars[vector]
    contiguous_reads = []
    for read in stmt.reads:
        regions = [_vars_of(r.min) for r in read.region]
        if any(v_var in used for used in regions[:-1]):
            # Vectorizing would gather across rows of this input: keep the loop scalar.
            return _Plan(spatial, reduce, None, 1, None, 1)
        if regions and v_var in regions[-1]:
            contiguous_reads.append(set().union(*regions))
    tile = None
    for i in reversed(spatial):
        if i == vector or (extent(sch, loops[i]) or 1) < 2:
            continue
        if any(iv_vars[i] not in used for used in contiguous_reads):
            tile = i
            break
    width = extent(sch, loops[vector]) or 1
    factor = vector_factor(width, lanes, tiled=tile is not None)
    rows = MAX_TILE_ROWS if factor <= lanes else MAX_TILE_ROWS // 2
    tile_factor = 1 if tile is None else largest_divisor(extent(sch, loops[tile]) or 1, rows)
    if tile_factor == 1:
        factor = vector_factor(width, lanes)
    return _Plan(spatial, reduce, vector, factor, tile if tile_factor > 1 else None, tile_factor)


class TiledReduction(CPUScheduleRule):
    """Convolutions, matmuls and pooling: register tile, vector lanes, parallel outer loops."""

    def apply(self, func: Any, target: Any, _: bool) -> Any:
        """A schedule of ``func``, or None unless it is one reduction with injective neighbours."""
        from tvm import s_tir, tirx

        if not isinstance(func, tirx.PrimFunc) or not self.is_target_available(target):
            return None
        sch = s_tir.Schedule(func)
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
        reductions = [b for b in blocks if is_reduction(sch, b)]
        if len(reductions) != 1:
            return None
        main = reductions[0]
        lanes = vector_lanes(target)
        plan = _plan(sch, main, lanes)
        if plan is None:
            return None
        try:
            _tile(sch, main, plan, lanes)
        except (s_tir.schedule.ScheduleError, RuntimeError):
            return None
        return sch


def _inline_producers(sch: Any, main: Any) -> None:
    """Inline the blocks before ``main`` that compute without conditions (a 1x1 conv's copy).

    Padding (``if_then_else``) stays a nest of its own: inlined, it would test
    the border in the innermost loop.
    """
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    position = next(i for i, b in enumerate(blocks) if sch.get(b).same_as(sch.get(main)))
    for producer in reversed(blocks[:position]):
        if not has_condition(sch, producer):
            try_inline(sch, producer)


def _split(sch: Any, main: Any, plan: _Plan) -> tuple[list[Any], list[Any]]:
    """Split the vector and tile loops: ``(outer spatial loops, [tile, vector] inner loops)``."""
    loops = sch.get_loops(main)
    outer, tile, vector = [], [], []
    for i in plan.spatial:
        if i == plan.vector:
            o, v = sch.split(loops[i], factors=[None, plan.vector_factor])
            outer.append(o)
            vector.append(v)
        elif i == plan.tile:
            o, t = sch.split(loops[i], factors=[None, plan.tile_factor])
            outer.append(o)
            tile.append(t)
        else:
            outer.append(loops[i])
    return outer, tile + vector


def _blocked_producer(sch: Any, main: Any, plan: _Plan) -> tuple[Any, int] | None:
    """(producer, k): a padding block to compute per step of ``main``'s first k loops, or None.

    The first ``k`` spatial loops of ``main`` each index a dimension of the
    producer's buffer directly (a depthwise conv's padded copy in channel
    blocks, ``packed[n, c_block, y + ry, x + rx, c]``: k = 2), so computing the
    producer inside those loops writes each element once and the conv reads
    the block back from cache. None when there is no such producer, when k
    leaves no loop to run inside it, or when the k loops run fewer than 2
    times (batch 1 of a conv over all input channels: the copy stays whole).
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
        if 0 < k < len(plan.spatial) and runs >= 2:
            return producer, k
    return None


def _tile(sch: Any, main: Any, plan: _Plan, lanes: int) -> None:
    _inline_producers(sch, main)
    blocked = _blocked_producer(sch, main, plan)
    local = sch.cache_write(main, 0, "local") if plan.vector is not None else None
    loops = sch.get_loops(main)
    reduce = [loops[i] for i in plan.reduce]  # before _split renumbers the loops
    outer, inner = _split(sch, main, plan)
    sch.reorder(*outer, *reduce, *inner)
    if blocked is None:
        fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
        sch.parallel(fused)
        _pad_per_tile(sch, main, plan, fused, lanes)
    else:
        producer, k = blocked
        head = sch.fuse(*outer[:k]) if k > 1 else outer[0]
        sch.parallel(head)
        rest = outer[k:]
        fused = sch.fuse(*rest) if len(rest) > 1 else rest[0]
        sch.compute_at(producer, head, preserve_unit_loops=True)
        _vectorize_tail(sch, producer, lanes)
    if local is not None:
        sch.reverse_compute_at(local, fused, preserve_unit_loops=True)
        _fuse_epilogue(sch, local)
        _write_back(sch, local, lanes)
    if plan.vector is not None:
        # Vectorize before decompose_reduction: the update block without its init
        # is no longer a reduction block, and TVM refuses to vectorize around it.
        sch.vectorize(inner[-1])
        if plan.tile is not None:
            sch.unroll(inner[0])
    init = sch.decompose_reduction(main, reduce[0])
    if plan.vector is not None:
        _vectorize_tail(sch, init, lanes)
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if not is_reduction(sch, block) and not _scheduled(sch, block):
            schedule_spatial(sch, block, lanes)


def _fuse_epilogue(sch: Any, local: Any) -> None:
    """Run the consumers of the accumulator tile (bias, activation) on the tile itself.

    The epilogue's inner blocks are inlined into their readers first, so that
    a consumer reading the output twice (HardSwish: ``x * clip(x + 3) / 6``)
    becomes one block; blocks are then inlined into the tile's write-back
    while the tile's output has that one reader (inlining one of two readers
    would leave the other reading a buffer nobody writes). A consumer that
    cannot be inlined (a broadcast multiply of a squeeze-excite block) stays a
    loop nest of its own.
    """
    from tvm import s_tir

    for block in _consumers_after(sch, local)[:-1]:
        try_inline(sch, block)
    for block in _consumers_after(sch, local):
        if len(sch.get_consumers(local)) != 1:
            return
        try:
            sch.reverse_compute_inline(block)
        except (s_tir.schedule.ScheduleError, RuntimeError):
            return


#: Most times a padding producer computed per tile may compute each element: more, and the
#: copy costs more than the pass over memory it saves. Measured, 1 thread, AVX-512: 3x3
#: stride-2 convs (1.5 here) ran 1.2-1.3x faster per tile (3 -> 16 on 224 x 224 0.35 ->
#: 0.28 ms, 16 -> 16 on 80 x 80 0.137 -> 0.104 ms), stride-1 ones (3) 1.15-1.25x slower.
MAX_PAD_RECOMPUTE = 1.5


def _pad_per_tile(sch: Any, main: Any, plan: _Plan, fused: Any, lanes: int) -> None:
    """Compute each padding producer of ``main`` per tile, inside its parallel loop.

    Only where each padded element is computed at most :data:`MAX_PAD_RECOMPUTE`
    times (:func:`_recompute`); the padded copy is then read back from cache
    instead of a nest of its own writing the whole copy out first.
    """
    from tvm import s_tir

    for producer in sch.get_producers(main):
        if not has_condition(sch, producer) or _recompute(sch, main, producer, plan) > \
                MAX_PAD_RECOMPUTE:
            continue
        try:
            sch.compute_at(producer, fused, preserve_unit_loops=True)
        except (s_tir.schedule.ScheduleError, RuntimeError):
            continue
        _vectorize_tail(sch, producer, lanes)


def _recompute(sch: Any, main: Any, producer: Any, plan: _Plan) -> float:
    """How many times a per-tile producer computes each element, by the windows of ``main``'s read.

    Per dimension of the read indexed ``a * v + b * r`` by an outer spatial
    variable ``v`` and a reduction variable ``r`` of extent ``e``, each step
    of ``v`` reads ``b * (e - 1) + 1`` elements and moves ``a``: a 3-tap
    window moved by stride 2 computes each element 1.5 times. Dimensions of
    the vector and tile variables are not counted (a tile's window overlaps
    its neighbour's only at its edges).
    """
    from tvm import tirx
    from tvm.sym import Analyzer

    stmt = sch.get(main)
    buffer = sch.get(producer).writes[0].source
    reads = [r for r in stmt.reads if r.source.same_as(buffer)]
    if len(reads) != 1:
        return float("inf")
    iv = stmt.iter_vars
    inner = {i for i in (plan.vector, plan.tile) if i is not None}

    def at(expr: Any, var: Any | None) -> Any:
        """``expr`` with every iteration variable 0 but ``var`` 1."""
        analyzer = Analyzer()
        for v in iv:
            value = 1 if var is not None and v.var.same_as(var) else 0
            analyzer.bind(v.var, tirx.const(value, str(v.dom.extent.ty)))
        return analyzer.simplify(expr)

    def coefficient(expr: Any, var: Any) -> int:
        value = at(expr - at(expr, None), var)
        return int(value.value) if isinstance(value, tirx.IntImm) else 0

    factor = 1.0
    for dim in reads[0].region:
        used = _vars_of(dim.min)
        spatial = [i for i in plan.spatial if iv[i].var in used]
        if len(spatial) != 1 or spatial[0] in inner:
            continue
        a = coefficient(dim.min, iv[spatial[0]].var)
        window = 1
        for i in plan.reduce:
            if iv[i].var in used:
                window += coefficient(dim.min, iv[i].var) * (int(iv[i].dom.extent) - 1)
        if a > 0:
            factor *= max(1.0, window / a)
    return factor


def _write_back(sch: Any, local: Any, lanes: int) -> None:
    """Vectorize the tile's write-back along the output's contiguous axis.

    A conv in channel blocks accumulates ``[pixels, channels]`` with the
    channels as the vector, but writes NCHW, where the channels are a plane
    apart: vectorized over channels, the write-back is a scatter of one store
    per element. Where another loop of the write-back indexes the output's
    last (contiguous) axis, it goes innermost and is vectorized, and the
    channel loop is unrolled, so LLVM transposes the tile in registers and
    stores whole rows (a 1x1 conv 16 -> 96 channels on 112 x 112 pixels, 1
    thread, AVX-512: see docs/benchmarks.md). Otherwise as
    :func:`_vectorize_tail`.
    """
    from tvm import s_tir

    stmt = sch.get(local)
    loops = sch.get_loops(local)
    n = len(stmt.iter_vars)
    own = loops[-n:] if len(loops) >= n else []
    last = _vars_of(stmt.writes[0].region[-1].min)
    rows = [i for i, iv in enumerate(stmt.iter_vars)
            if iv.var in last and 2 <= (extent(sch, own[i]) or 0) <= 2 * lanes] if own else []
    if not rows or rows[-1] == n - 1 or (extent(sch, own[-1]) or 0) > 2 * lanes:
        _vectorize_tail(sch, local, lanes)
        return
    j = rows[-1]
    try:
        sch.reorder(*[loop for i, loop in enumerate(own) if i != j], own[j])
    except (s_tir.schedule.ScheduleError, RuntimeError):
        # A predicated write-back (channels padded to whole vectors) has no affine
        # binding to reorder under: it keeps the channel vector.
        _vectorize_tail(sch, local, lanes)
        return
    sch.unroll(own[-1])
    sch.vectorize(own[j])


def _consumers_after(sch: Any, block: Any) -> list[Any]:
    """The blocks after ``block`` in the function (the epilogue), in order."""
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    names = [sch.get(b).name_hint for b in blocks]
    return blocks[names.index(sch.get(block).name_hint) + 1:]


def _scheduled(sch: Any, block: Any) -> bool:
    """Whether the block's outermost loop is already parallel (inside the main nest)."""
    from tvm import tirx

    loops = sch.get_loops(block)
    return bool(loops) and sch.get(loops[0]).kind == tirx.ForKind.PARALLEL


def _vectorize_tail(sch: Any, block: Any, lanes: int) -> None:
    """Vectorize the block's innermost loop if it is short enough to be one vector op."""
    loops = sch.get_loops(block)
    if len(loops) < 2:
        return
    n = extent(sch, loops[-1])
    if n is not None and 2 <= n <= 2 * max(lanes, 16):
        sch.vectorize(loops[-1])


class Injective(CPUScheduleRule):
    """Functions of spatial blocks only: inner blocks inlined, each nest parallel and vector."""

    def apply(self, func: Any, target: Any, _: bool) -> Any:
        """A schedule of ``func``, or None when it has a reduction."""
        from tvm import s_tir, tirx

        if not isinstance(func, tirx.PrimFunc) or not self.is_target_available(target):
            return None
        sch = s_tir.Schedule(func)
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
        if not blocks or any(is_reduction(sch, b) for b in blocks):
            return None
        for block in blocks[:-1]:
            try_inline(sch, block)
        lanes = vector_lanes(target)
        try:
            for block in sch.get_child_blocks(sch.get_sblock("root")):
                schedule_spatial(sch, block, lanes)
        except (s_tir.schedule.ScheduleError, RuntimeError):
            return None
        return sch


class ParallelFallback(CPUScheduleRule):
    """Anything else: each root block's outer spatial loops fused and run in parallel."""

    def apply(self, func: Any, target: Any, _: bool) -> Any:
        """A schedule of ``func`` (None only for a non-CPU target or a failed schedule)."""
        from tvm import s_tir, tirx

        if not isinstance(func, tirx.PrimFunc) or not self.is_target_available(target):
            return None
        sch = s_tir.Schedule(func)
        lanes = vector_lanes(target)
        try:
            for block in sch.get_child_blocks(sch.get_sblock("root")):
                if not is_reduction(sch, block):
                    schedule_spatial(sch, block, lanes)
                    continue
                stmt = sch.get(block)
                loops = sch.get_loops(block)
                spatial = [loop for loop, iv in zip(loops, stmt.iter_vars, strict=False)
                           if iv.iter_type == tirx.IterVar.DataPar]
                leading = []
                for loop in loops:
                    if not any(loop.same_as(s) for s in spatial):
                        break
                    leading.append(loop)
                if leading:
                    sch.parallel(sch.fuse(*leading) if len(leading) > 1 else leading[0])
        except (s_tir.schedule.ScheduleError, RuntimeError):
            return None
        return sch
