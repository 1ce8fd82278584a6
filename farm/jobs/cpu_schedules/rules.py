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
  whole tile, and a few vectors of a third axis that the other input does
  not depend on (a conv's output channel blocks) with it, so each value of
  that input serves them all (:attr:`TilePlan.block`); the accumulators
  live in a local buffer that LLVM keeps in registers; the outer output
  loops are fused into one parallel loop, and the consumers run inline on
  each finished tile.
- :class:`Injective`: only spatial blocks (elementwise, transpose, resize).
- :class:`ParallelFallback`: anything else, block by block.

Softmax and layer norm are left to ``dlight.cpu.Reduction`` (see
:func:`farm.jobs.cpu_schedules.default_rules` for the order).
"""

from __future__ import annotations

from typing import Any

from tvm.s_tir.dlight.cpu.base import CPUScheduleRule

from farm.jobs.cpu_schedules.common import (
    extent,
    has_condition,
    is_reduction,
    largest_divisor,
    parallel,
    root_blocks,
    schedule_spatial,
    target_cores,
    try_inline,
    vars_of,
    vector_factor,
    vector_lanes,
    vector_registers,
    vectorize_tail,
)
from farm.jobs.cpu_schedules.legalize_conv import DEPTHWISE_PACK
from farm.jobs.cpu_schedules.plan import MAX_TILE_ROWS, TilePlan
from farm.jobs.cpu_schedules.tile_io import blocked_producer, write_back

#: Most vectors of the tile's block loop (output channel blocks of a conv): the knob's range.
#: onnxruntime's MLAS NCHWc conv kernel keeps up to 4 filter blocks of a row of outputs in
#: registers (``onnxruntime/core/mlas/lib/x86_64/SconvKernelAvx512F.S``).
MAX_TILE_BLOCKS = 4

#: The default's accumulators (block vectors x tile rows) per vector register of the target:
#: half of them. Measured with AVX-512 (32 registers) on a pinned core, each zoo conv alone
#: (``bench/bench_tile_knobs.py``, docs/benchmarks.md's history): 2 blocks x 7 or 8 rows (14-16
#: accumulators) ran 0.84-0.98x the one-block tile on all ten convs, 4 x 7 (28) 0.75-1.01x,
#: 3 x 8 (24) 1.7x on MobileNetV2's 16 -> 96 conv. A half vector counts as half a register
#: (:func:`_lanes_taken`).
ACCUMULATORS_PER_REGISTER = 0.5


def _plan(sch: Any, block: Any, lanes: int, registers: int) -> TilePlan | None:
    """The tiling of a reduction block, or None if its loops are not as legalization writes them.

    ``registers``: the target's vector registers (:func:`farm.jobs.cpu_schedules.common.
    vector_registers`), which bound the default's channel blocks.
    """
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
    out_last = vars_of(stmt.writes[0].region[-1].min)
    vector = None
    for i in reversed(spatial):
        if extent(sch, loops[i]) > 1 and iv_vars[i] in out_last:  # type: ignore[operator]
            vector = i
            break
    if vector is None:
        return TilePlan(spatial, reduce, None, 1, None, 1)
    v_var = iv_vars[vector]
    contiguous_reads = []
    for read in stmt.reads:
        regions = [vars_of(r.min) for r in read.region]
        if any(v_var in used for used in regions[:-1]):
            # Vectorizing would gather across rows of this input: keep the loop scalar.
            return TilePlan(spatial, reduce, None, 1, None, 1)
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
        return TilePlan(spatial, reduce, vector, factor, None, 1)
    room = int(registers * ACCUMULATORS_PER_REGISTER * lanes) // (tile_factor * _lanes_taken(
        factor, lanes))
    block, blocks = _block_loop(sch, loops, stmt, (vector, tile), spatial, contiguous_reads, room)
    # One vector of at most a register a row, by an input not read as vectors.
    deeper = blocks == 1 and factor <= lanes and len(contiguous_reads) < len(stmt.reads)
    tile_factor = _deeper_tile(extent(sch, loops[tile]) or 1, tile_factor, room if deeper else 1)
    return TilePlan(spatial, reduce, vector, factor, tile, tile_factor, block, blocks)


def _deeper_tile(n: int, rows: int, room: int) -> int:
    """The tile rows of a tile of one channel vector that broadcasts its other input.

    With no second vector to take the registers (a conv to 16 output
    channels: one block of 16 lanes), the tile takes up to twice
    :data:`MAX_TILE_ROWS` rows where the default's share of the registers
    holds them (``room``: the tile's vectors that fit, over ``rows``), so
    each weight vector serves twice the pixels and the loop over the
    reduction, which is short for a stem (3 channels x 3 x 3), runs half the
    times. Measured with AVX-512 on a pinned core, 15 rounds alternating:
    det_head's 3x3 stride-2 stem 3 -> 16 on 80 x 80 0.068 -> 0.057 ms with 16
    rows (onnxruntime 0.048), MobileNetV2's 1x1 32 -> 16 on 112 x 112 0.146
    -> 0.142 ms; whole models untuned, 1 thread, interleaved
    (``bench/bench_ab_untuned.py``, 25 rounds, two runs): det_head 0.92-0.93x,
    text_direction 0.93-0.95x, the other zoo models 0.97-1.00x. A depthwise conv
    loads a vector of input per row and broadcasts nothing; its tile stays
    (``room`` 1: the rows are kept), and so does a tile of two registers a row
    (:data:`MAX_TILE_ROWS`): the encoder's attention matmul 128 x 64 x 128 of
    rows of 32 lanes took 8 rows instead of 4, and the model ran 1.04x.

    >>> [_deeper_tile(n, rows, room) for n, rows, room in ((80, 8, 2), (112, 7, 2), (28, 7, 1))]
    [16, 14, 7]
    """
    return max(rows, largest_divisor(n, min(2 * MAX_TILE_ROWS, rows * room)))


def _lanes_taken(factor: int, lanes: int) -> int:
    """The register lanes one row of the tile takes: ``factor`` where it is under a register.

    A vector of two registers' lanes takes two; a half vector (a conv's blocks
    of 8 channels with 16 lanes) counts as half a register, so such a tile
    takes twice the channel blocks of a full one. Its FMAs do half the work
    each, and more blocks load each broadcast input value for more of them:
    MobileNetV3-small's 1x1 16 -> 72 on 56 x 56 (blocks of 8, 9 of them,
    :func:`farm.jobs.cpu_schedules.legalize.depthwise_fed`) took 3 blocks
    of 8 rows instead of 1; the model, untuned, 1 thread, AVX-512,
    interleaved (``bench/bench_ab_untuned.py``, 15 rounds): 0.97x, the other
    zoo models 0.98-1.01x.

    >>> _lanes_taken(8, 16), _lanes_taken(16, 16), _lanes_taken(28, 16)
    (8, 16, 32)
    """
    return factor if factor < lanes else -(-factor // lanes) * lanes


def _block_loop(sch: Any, loops: list[Any], stmt: Any, taken: tuple[int | None, ...],
                spatial: list[int], contiguous_reads: list[set[Any]],
                room: int) -> tuple[int | None, int]:
    """(:attr:`TilePlan.block`, its default factor), or (None, 1) where there is none.

    The block loop: every vector input reads it, some other input does not (a
    conv in channel blocks: the output channel blocks, which the weight's
    vector depends on and the input pixel broadcast to the tile does not). Its
    default factor: the largest divisor of its extent up to ``room`` (the tile
    rows' vectors that fit the default's share of the registers) and
    :data:`MAX_TILE_BLOCKS`.
    """
    iv_vars = [iv.var for iv in stmt.iter_vars]
    others = [set().union(*[vars_of(r.min) for r in read.region]) for read in stmt.reads]
    others = [used for used in others if used not in contiguous_reads]
    for i in reversed(spatial):
        if i in taken or (extent(sch, loops[i]) or 1) < 2:
            continue
        if all(iv_vars[i] in used for used in contiguous_reads) and \
                any(iv_vars[i] not in used for used in others):
            return i, largest_divisor(extent(sch, loops[i]) or 1,
                                      max(1, min(MAX_TILE_BLOCKS, room)))
    return None, 1


class TiledReduction(CPUScheduleRule):
    """Convolutions, matmuls and pooling: register tile, vector lanes, parallel outer loops."""

    def apply(self, func: Any, target: Any, _: bool) -> Any:
        """A schedule of ``func``, or None unless it is one reduction with injective neighbours."""
        from tvm import s_tir

        found = root_blocks(self, func, target)
        if found is None:
            return None
        sch, blocks = found
        reductions = [b for b in blocks if is_reduction(sch, b)]
        if len(reductions) != 1:
            return None
        main = reductions[0]
        lanes = vector_lanes(target)
        plan = _plan(sch, main, lanes, vector_registers(target))
        if plan is None:
            return None
        try:
            _tile(sch, main, plan, lanes, target_cores(target))
        except (s_tir.schedule.ScheduleError, RuntimeError):
            return None
        return sch


def _inline_producers(sch: Any, main: Any) -> None:
    """Inline the blocks before ``main`` that compute without conditions (a 1x1 conv's copy).

    Padding (``if_then_else``) stays a nest of its own: inlined, it would test
    the border in the innermost loop. Except a padded copy into channel blocks
    of an input that is in those blocks already (:func:`_pads_blocks`).
    """
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    position = next(i for i, b in enumerate(blocks) if sch.get(b).same_as(sch.get(main)))
    for producer in reversed(blocks[:position]):
        if not has_condition(sch, producer) or _pads_blocks(sch, producer):
            try_inline(sch, producer)


def _pads_blocks(sch: Any, producer: Any) -> bool:
    """Whether ``producer`` only pads an input already in channel blocks (a handed-over one).

    A depthwise conv's or a pool's padded copy (``DEPTHWISE_PACK``) of a
    conv's result handed over in blocks (:mod:`farm.jobs.cpu_schedules.handoff`)
    moves no data between layouts: it writes the whole padded image once and
    the conv reads it back. Inlined, each tap tests the border, one scalar
    test for a vector of channels, and the copy is gone. Untuned, 1 thread,
    AVX-512, interleaved (``bench/bench_ab_untuned.py``, 15 rounds,
    docs/benchmarks.md): MobileNetV3-small 0.95x, MobileNetV2 0.91x; its 16-channel
    depthwise conv stride 2 on 112 x 112 ran 0.044 ms with the copy, onnxruntime
    0.017 ms.
    """
    stmt = sch.get(producer)
    return (stmt.name_hint == DEPTHWISE_PACK and len(stmt.reads) == 1
            and len(stmt.reads[0].source.shape) == len(stmt.writes[0].source.shape))


def _split(sch: Any, main: Any, plan: TilePlan, lanes: int) -> tuple[list[Any], list[Any]]:
    """Split the block, tile and vector loops: ``(outer spatial loops, [block, tile, vector])``.

    Each split's factors are a ``sample_perfect_tile`` whose decision is the
    plan's, so the schedule is the plan's, and its trace is one MetaSchedule's
    ``MutateTileSize`` can change: the default schedule is measured as a
    task's first trial (:mod:`farm.tuning.baseline`), and the evolutionary
    search draws its population partly from the measured best, so it also
    searches the default's tile sizes (vector width up to two registers, tile
    rows up to :data:`MAX_TILE_ROWS`, channel blocks up to
    :data:`MAX_TILE_BLOCKS`) beside its own design space.
    """
    loops = sch.get_loops(main)
    outer, block, tile, vector = [], [], [], []
    for i in plan.spatial:
        if i == plan.vector:
            o, v = _sampled_split(sch, loops[i], plan.vector_factor, max(2 * lanes,
                                                                         plan.vector_factor))
            outer.append(o)
            vector.append(v)
        elif i == plan.tile:
            o, t = _sampled_split(sch, loops[i], plan.tile_factor, max(MAX_TILE_ROWS,
                                                                       plan.tile_factor))
            outer.append(o)
            tile.append(t)
        elif i == plan.block:
            o, b = _sampled_split(sch, loops[i], plan.block_factor, MAX_TILE_BLOCKS)
            outer.append(o)
            block.append(b)
        else:
            outer.append(loops[i])
    return outer, block + tile + vector


def _sampled_split(sch: Any, loop: Any, factor: int, most: int) -> list[Any]:
    """Split ``loop`` into ``[extent // factor, factor]`` through a sampled perfect tile."""
    n = extent(sch, loop) or factor
    factors = sch.sample_perfect_tile(loop, n=2, max_innermost_factor=most,
                                      decision=[n // factor, factor])
    return list(sch.split(loop, factors=factors))


def _tile(sch: Any, main: Any, plan: TilePlan, lanes: int, cores: int) -> None:
    _inline_producers(sch, main)
    blocked = blocked_producer(sch, main, plan, cores)
    local = sch.cache_write(main, 0, "local") if plan.vector is not None else None
    loops = sch.get_loops(main)
    reduce = [loops[i] for i in plan.reduce]  # before _split renumbers the loops
    outer, inner = _split(sch, main, plan, lanes)
    sch.reorder(*outer, *reduce, *inner)
    if blocked is None:
        fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
        parallel(sch, fused, cores)
    else:
        producer, k = blocked
        head = sch.fuse(*outer[:k]) if k > 1 else outer[0]
        parallel(sch, head, cores)
        rest = outer[k:]
        fused = sch.fuse(*rest) if len(rest) > 1 else rest[0]
        sch.compute_at(producer, head, preserve_unit_loops=True)
        vectorize_tail(sch, producer, lanes)
    if local is not None:
        sch.reverse_compute_at(local, fused, preserve_unit_loops=True)
        _fuse_epilogue(sch, local)
        write_back(sch, local, lanes)
    if plan.vector is not None:
        # Vectorize before decompose_reduction: the update block without its init
        # is no longer a reduction block, and TVM refuses to vectorize around it.
        sch.vectorize(inner[-1])
        for loop in inner[:-1]:  # the block and tile loops: one register each
            sch.unroll(loop)
    init = sch.decompose_reduction(main, reduce[0])
    if plan.vector is not None:
        vectorize_tail(sch, init, lanes)
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if not is_reduction(sch, block) and not _in_nest(sch, block, main):
            schedule_spatial(sch, block, lanes, cores)


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


def _consumers_after(sch: Any, block: Any) -> list[Any]:
    """The blocks after ``block`` in the function (the epilogue), in order."""
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    names = [sch.get(b).name_hint for b in blocks]
    return blocks[names.index(sch.get(block).name_hint) + 1:]


def _in_nest(sch: Any, block: Any, main: Any) -> bool:
    """Whether ``block`` runs inside ``main``'s outermost loop (its write-back, a blocked copy)."""
    loops, nest = sch.get_loops(block), sch.get_loops(main)
    return bool(loops) and sch.get(loops[0]).same_as(sch.get(nest[0]))


class Injective(CPUScheduleRule):
    """Functions of spatial blocks only: inner blocks inlined, each nest parallel and vector."""

    def apply(self, func: Any, target: Any, _: bool) -> Any:
        """A schedule of ``func``, or None when it has a reduction."""
        from tvm import s_tir

        found = root_blocks(self, func, target)
        if found is None:
            return None
        sch, blocks = found
        if not blocks or any(is_reduction(sch, b) for b in blocks):
            return None
        for block in blocks[:-1]:
            try_inline(sch, block)
        lanes = vector_lanes(target)
        try:
            for block in sch.get_child_blocks(sch.get_sblock("root")):
                schedule_spatial(sch, block, lanes, target_cores(target))
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
                    schedule_spatial(sch, block, lanes, target_cores(target))
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
                    parallel(sch, sch.fuse(*leading) if len(leading) > 1 else leading[0],
                             target_cores(target))
        except (s_tir.schedule.ScheduleError, RuntimeError):
            return None
        return sch
