"""Loop helpers the CPU default schedules share: vector lanes, divisors, generic nests.

All work on a :class:`tvm.s_tir.Schedule` of one PrimFunc as TVM's Relax
legalization writes it: one loop per block iteration variable, in order.
"""

from __future__ import annotations

from typing import Any

#: Vector register width assumed when LLVM cannot say for the target (NEON: 128 bits).
DEFAULT_VECTOR_BITS = 128


def vector_lanes(target: Any, dtype_bits: int = 32) -> int:
    """Elements of ``dtype_bits`` in one vector register of ``target`` (at least 2)."""
    from tvm.target.codegen import llvm_get_vector_width

    try:
        bits = int(llvm_get_vector_width(target))
    except Exception:  # noqa: BLE001 -- LLVM refuses some targets; assume NEON's width
        bits = DEFAULT_VECTOR_BITS
    if bits <= 0:
        bits = DEFAULT_VECTOR_BITS
    return max(bits // dtype_bits, 2)


def vector_registers(target: Any) -> int:
    """Vector registers of ``target``'s CPU: 32 with AVX-512 or on AArch64, else 16.

    Intel's and Arm's manuals: AVX-512 adds ``zmm16``-``zmm31``; AArch64 has
    ``v0``-``v31``; SSE/AVX2 on x86-64 and NEON on 32-bit Arm have 16.
    """
    triple = str(target.attrs.get("mtriple") or "")
    if triple.startswith(("aarch64", "arm64")) or vector_lanes(target) >= 16:
        return 32
    return 16


def root_blocks(rule: Any, func: Any, target: Any) -> tuple[Any, list[Any]] | None:
    """``(schedule of func, its root's blocks)``, or None where ``rule`` does not apply.

    A dlight rule takes a ``tirx.PrimFunc`` of a target its ``is_target_available``
    accepts (a CPU target for ``CPUScheduleRule``); anything else it leaves.
    """
    from tvm import s_tir, tirx

    if not isinstance(func, tirx.PrimFunc) or not rule.is_target_available(target):
        return None
    sch = s_tir.Schedule(func)
    return sch, list(sch.get_child_blocks(sch.get_sblock("root")))


def target_cores(target: Any) -> int:
    """The target's ``num-cores``, 0 where it does not say."""
    return int(target.attrs.get("num-cores") or 0)


def parallel(sch: Any, loop: Any, cores: int) -> None:
    """Run ``loop`` in parallel, unless the target has one core (``cores`` 1; 0: unknown).

    On one core a parallel loop is one ``TVMBackendParallelLaunch`` for
    nothing: with the thread pool configured as the phone session does
    (``runtime.config_threadpool(0, 1)``, no ``TVM_NUM_THREADS``) each launch
    went through TVM's thread pool and cost about 6.5 us on this host's
    AVX-512 core (det_head's 1x1 conv 64 -> 32 on 10 x 10 and its 10 x 10 ->
    20 x 20 resize, one launch each: 0.0046 -> 0.011 ms; see docs/benchmarks.md's history).
    """
    if cores != 1:
        sch.parallel(loop)


def extent(sch: Any, loop: Any) -> int | None:
    """The loop's constant trip count, or None if it is symbolic."""
    from tvm import tirx

    value = sch.get(loop).extent
    return int(value.value) if isinstance(value, tirx.IntImm) else None


def vector_factor(n: int, lanes: int, tiled: bool = False) -> int:
    """How many iterations of a loop of ``n`` to vectorize.

    Two or one whole registers where they divide the loop. Else, under a
    register tile of several rows (``tiled``), the largest divisor that fits
    one register; for a single row of accumulators, the whole loop when it
    fits in two registers, else the largest divisor up to two registers.
    Measured with AVX-512 (16 lanes) on a pinned core: a 1x1 conv on 28x28
    took 0.11 ms with 14 lanes, 0.19 ms with 4, 0.54 ms with 28 (two
    registers, one masked, per tile row); a depthwise 3x3 on 28x28 took
    0.10 ms with 28 lanes and 0.52 ms with 4.

    >>> [vector_factor(n, 16) for n in (112, 64, 56, 28, 7, 1000)]
    [16, 32, 28, 28, 7, 25]
    >>> [vector_factor(n, 16, tiled=True) for n in (112, 56, 28, 14, 7)]
    [16, 14, 14, 14, 7]
    """
    for factor in (2 * lanes, lanes):
        if n % factor == 0:
            return factor
    if tiled:
        return largest_divisor(n, lanes)
    if n <= 2 * lanes:
        return n
    return largest_divisor(n, 2 * lanes)


def largest_divisor(n: int, limit: int) -> int:
    """The largest divisor of ``n`` not above ``limit``.

    >>> largest_divisor(96, 4), largest_divisor(10, 4), largest_divisor(7, 4)
    (4, 2, 1)
    """
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def is_reduction(sch: Any, block: Any) -> bool:
    """Whether the block has a reduction iteration variable."""
    from tvm import tirx

    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(block).iter_vars)


def schedule_spatial(sch: Any, block: Any, lanes: int, cores: int = 0) -> None:
    """Parallel outer loops, vectorized innermost loop of a block with only spatial loops.

    Loops but the last are fused into one parallel loop; the last is split by
    the vector factor and its inner part vectorized. Where the row splits
    into vectors of under half the lanes (a padded row of 82 floats: 41 of 2
    lanes of 16), the last loop is left plain for LLVM's loop vectorizer,
    which takes whole vectors and a remainder: 1 thread, AVX-512, the padding
    copy of 16 x 80 x 80 (rows of 82) took 0.084 ms in TVM's 2-lane vectors,
    0.009 ms so; 4 x 146 x 146 (rows of 148, 4 lanes) 0.019 / 0.0065 ms. A
    block whose loops are symbolic is only parallelized.
    """
    loops = sch.get_loops(block)
    if not loops:
        return
    inner = loops[-1]
    n = extent(sch, inner)
    repeat = repeat_factor(sch, block, lanes)
    if len(loops) > 1:
        parallel(sch, sch.fuse(*loops[:-1]), cores)
    if repeat is not None:
        # Each input value goes to `repeat` adjacent outputs: TVM's vector loads of
        # `x // repeat` are one scalar load per lane; the plain loop of inputs, the
        # repeats unrolled in it, is what LLVM's loop vectorizer turns into vector
        # loads and interleaving shuffles (an AVX-512 `vpermps`).
        sch.unroll(sch.split(inner, factors=[None, repeat])[1])
        return
    if n is None or n < 2:
        return
    factor = vector_factor(n, lanes)
    if factor < 2 or (factor < min(n, lanes // 2) and len(loops) > 1):
        return  # a plain loop: LLVM vectorizes it, whole vectors and a remainder
    if factor == n:
        sch.vectorize(inner)
        return
    outer, vec = sch.split(inner, factors=[None, factor])
    if len(loops) == 1:
        parallel(sch, outer, cores)
    sch.vectorize(vec)


def repeat_factor(sch: Any, block: Any, lanes: int) -> int | None:
    """``s`` where the block reads its innermost loop's variable ``x`` only as ``x // s``.

    A nearest upsampling by ``s`` (``out[.., x] = data[.., x // s]``,
    :func:`farm.jobs.cpu_schedules.legalize._resize2d`): each loaded value is
    stored ``s`` times in a row. None where a read uses ``x`` otherwise, where
    ``s`` does not divide the loop, or where the input row (``n / s``) is
    shorter than a vector (LLVM then leaves most of it scalar). Measured, 1
    thread, AVX-512, det_head's upsamplings, TVM's vector loop (a scalar load
    per lane) / the repeat: 32 x 20 x 20 -> 40 x 40 0.023 / 0.0022 ms
    (onnxruntime 0.006); 32 x 10 x 10 -> 20 x 20 0.0058 / 0.0080 (kept as it was).
    """
    from tvm import tirx

    loops = sch.get_loops(block)
    stmt = sch.get(block)
    if not loops or len(loops) != len(stmt.iter_vars):
        return None
    var = stmt.iter_vars[-1].var
    n = extent(sch, loops[-1])
    factor = None
    for read in stmt.reads:
        for dim in read.region:
            if var not in vars_of(dim.min):
                continue
            index = dim.min
            if not (isinstance(index, tirx.FloorDiv) and index.a.same_as(var)
                    and isinstance(index.b, tirx.IntImm)) or factor not in (None,
                                                                            int(index.b.value)):
                return None
            factor = int(index.b.value)
    if factor is None or factor < 2 or n is None or n % factor or n // factor < lanes:
        return None
    return factor


def try_inline(sch: Any, block: Any) -> bool:
    """``compute_inline`` the block if TVM allows it; returns whether it did."""
    from tvm.s_tir.schedule import ScheduleError

    try:
        sch.compute_inline(block)
    except (ScheduleError, RuntimeError):
        return False
    return True


def has_condition(sch: Any, block: Any) -> bool:
    """Whether the block's value is conditional (``if_then_else`` or ``Select``, e.g. padding).

    TVM 0.27's Python API has no TIR visitor, so this reads the block's script.
    """
    text = str(sch.get(block).body)
    return "if_then_else" in text or "T.Select" in text


def vars_of(expr: Any) -> set[Any]:
    """The variables ``expr`` uses."""
    from tvm.tirx.analysis import undefined_vars

    return set(undefined_vars(expr))


def vectorize_tail(sch: Any, block: Any, lanes: int) -> None:
    """Vectorize the block's innermost loop if it is short enough to be one vector op."""
    loops = sch.get_loops(block)
    if len(loops) < 2:
        return
    n = extent(sch, loops[-1])
    if n is not None and 2 <= n <= 2 * max(lanes, 16):
        sch.vectorize(loops[-1])
