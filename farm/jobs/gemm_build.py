"""The GEMM kernel, its CPU, naive and GPU schedules, and its build into the compile cache.

The schedules are described in :mod:`farm.jobs.gemm`, which runs the build on a
phone and re-exports these names.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from farm.errors import CompileError, SpecError
from farm.jobs.cache import CacheKey, CompileCache
from farm.jobs.ndk import Linker, linker_for
from farm.jobs.params import DeviceKind, GemmParams, GemmSchedule
from farm.jobs.targets import work_group_limit
from farm.jobs.tvm_errors import reason_of

#: Bump when a schedule below changes, so cached libraries are rebuilt.
SCHEDULE_VERSION = "v1"


def gemm_flop(n: int) -> int:
    """Floating point operations of one N x N x N GEMM (a multiply and an add each)."""
    return 2 * n**3


def gemm_module(n: int, dtype: str, name: str = "gemm") -> Any:
    """The unscheduled GEMM as an IRModule holding one PrimFunc ``name``.

    Args:
        n: matrix side N.
        dtype: element type, e.g. ``"float32"``.
        name: the function's name (and exported symbol).

    Returns:
        ``tvm.IRModule`` with ``name(A: dtype[N, N], B: dtype[N, N], C: dtype[N, N])``.
    """
    import tvm
    from tvm import te

    a = te.placeholder((n, n), dtype, name="A")
    b = te.placeholder((n, n), dtype, name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    func = te.create_prim_func([a, b, c]).with_attr("global_symbol", name)
    return tvm.IRModule({name: func})


def check_params(params: GemmParams, target: dict[str, Any]) -> None:
    """Refuse a GEMM the target cannot run.

    The GPU schedule runs ``bn * bn`` threads per work-group; the limit is the
    phone's own where it was read (:func:`farm.jobs.targets.work_group_limit`).

    Args:
        params: the workload and schedule.
        target: the phone's target dict.

    Raises:
        SpecError: N is not positive, bn does not divide N, ``bn * bn`` exceeds
            the phone's work-group limit, or a naive GEMM is asked of a GPU.
    """
    if params.n <= 0:
        raise SpecError("params.n", f"must be positive, got {params.n}")
    if params.schedule is GemmSchedule.NAIVE:
        if params.device is not DeviceKind.CPU:
            raise SpecError("params.schedule", "the naive schedule runs on the cpu only")
        return
    if params.bn <= 0 or params.n % params.bn:
        raise SpecError("params.bn", f"must divide n={params.n}, got {params.bn}")
    limit = work_group_limit(target)
    if params.device is not DeviceKind.CPU and params.bn * params.bn > limit:
        source = ("read from the phone" if "max_threads_per_block" in target
                  else "assumed: the phone's own limit was not read")
        raise SpecError(
            "params.bn",
            f"bn*bn={params.bn**2} threads exceed the {params.device.value} work-group "
            f"limit of {limit} ({source}); use bn <= {math.isqrt(limit)}",
        )


def schedule_cpu(mod: Any, bn: int, name: str = "gemm") -> Any:
    """The CPU schedule: tile by ``bn``, vectorise the inner column loop, parallel rows.

    Args:
        mod: from :func:`gemm_module`.
        bn: tile size; must divide N.
        name: the function to schedule.

    Returns:
        The scheduled IRModule.
    """
    from tvm import s_tir

    sch = s_tir.Schedule(mod)
    sch.work_on(name)
    block = sch.get_sblock("C")
    i, j, k = sch.get_loops(block)
    i_outer, i_inner = sch.split(i, [None, bn])
    j_outer, j_inner = sch.split(j, [None, bn])
    k_outer, k_inner = sch.split(k, [None, 4])
    sch.reorder(i_outer, j_outer, k_outer, i_inner, k_inner, j_inner)
    sch.parallel(i_outer)
    sch.vectorize(j_inner)
    # Zero C's tile before the reduction loop rather than testing k == 0 inside it.
    sch.decompose_reduction(block, k_outer)
    return sch.mod


def schedule_gpu(mod: Any, bn: int, name: str = "gemm") -> Any:
    """The seeds' GPU schedule: ``bn x bn`` tiles, one work-group (thread block) per tile.

    Args:
        mod: from :func:`gemm_module`.
        bn: tile size; must divide N, ``bn * bn`` threads per work-group.
        name: the function to schedule.

    Returns:
        The scheduled IRModule.
    """
    from tvm import s_tir

    sch = s_tir.Schedule(mod)
    sch.work_on(name)
    block = sch.get_sblock("C")
    i, j, _k = sch.get_loops(block)
    i_outer, i_inner = sch.split(i, [None, bn])
    j_outer, j_inner = sch.split(j, [None, bn])
    sch.reorder(i_outer, j_outer, i_inner, j_inner)
    sch.bind(i_outer, "blockIdx.y")
    sch.bind(j_outer, "blockIdx.x")
    sch.bind(i_inner, "threadIdx.y")
    sch.bind(j_inner, "threadIdx.x")
    return sch.mod


def cache_key(params: GemmParams, target: dict[str, Any]) -> CacheKey:
    """The compile cache key of a GEMM build."""
    import tvm

    schedule = f"{params.device.value} bn={params.bn} {SCHEDULE_VERSION}"
    if params.schedule is GemmSchedule.NAIVE:
        schedule = f"{params.device.value} naive"
    return CacheKey(
        workload=f"gemm n={params.n} dtype={params.dtype}",
        schedule=schedule,
        target=target,
        tvm_version=tvm.__version__,
    )


def build_gemm(
    params: GemmParams, target: dict[str, Any], cache: CompileCache, linker: Linker | None = None
) -> Path:
    """Compile the scheduled GEMM for ``target``, once per cache key.

    Args:
        params: the workload and schedule.
        target: target dict from :func:`farm.jobs.targets.target_for`.
        cache: where built libraries are kept.
        linker: how to link; resolved from the target when None.

    Returns:
        Path of the cached ``.so``.

    Raises:
        SpecError: N or bn are invalid.
        ToolMissing: the NDK (or a host compiler) is missing.
        CompileError: TVM could not compile or link the kernel.
    """
    check_params(params, target)
    linker = linker or linker_for(target)
    workload = f"gemm n={params.n} dtype={params.dtype}"

    def build(out: Path) -> None:
        import tvm

        try:
            mod = gemm_module(params.n, params.dtype)
            if params.schedule is GemmSchedule.NAIVE:
                pass  # the seeds' te.compute as it is
            elif params.device is DeviceKind.CPU:
                mod = schedule_cpu(mod, params.bn)
            else:
                mod = schedule_gpu(mod, params.bn)
            executable = tvm.compile(mod, target=tvm.target.Target(target))
            executable.export_library(str(out), fcompile=linker)
        except (RuntimeError, ValueError, TypeError) as exc:  # TVM's errors derive from these
            raise CompileError(workload, reason_of(exc)) from exc

    return cache.get_or_build(cache_key(params, target), build)
