"""The seeds' GEMM benchmark: ``C[N, N] = A[N, N] @ B[N, N]`` on a phone's CPU or GPU.

The kernel is written with ``te`` and turned into a TIR function with
``te.create_prim_func``; schedules use TVM 0.27's ``tvm.s_tir.Schedule``:

* CPU: rows and columns tiled by ``bn``, the reduction split by 4 and reordered so
  the innermost loop walks a row of B and C; that loop is vectorised and the row
  tiles run in parallel on the TVM thread pool.
* naive (``--schedule naive``, CPU only): the unscheduled ``te.compute`` GEMM as
  the seeds write it, one thread, no tiling, for a like-for-like figure beside a
  user's hand script.
* GPU, OpenCL, Vulkan or CUDA (the seeds' GPU schedule): rows and columns split by
  ``bn``; the outer parts are bound to ``blockIdx.y/x`` and the inner parts to
  ``threadIdx.y/x``, so one work-group (CUDA: thread block) of ``bn x bn`` threads
  computes one ``bn x bn`` tile of C, so ``bn * bn`` may not exceed the device's
  work-group limit (:func:`check_params`). With ``bn=16`` on ``cuda`` this is the
  seeds' "plain 16x16 thread-block schedule" (figures in docs/benchmarks.md).

A run builds (or takes from the compile cache), uploads the ``.so`` over the RPC
session, checks C against numpy and times the kernel with ``time_evaluator``.
GFLOPS is ``2 N^3 / t / 1e9`` with ``t`` the mean of the samples (seconds).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from farm.errors import CompileError, SessionError, SpecError
from farm.jobs.cache import CacheKey, CompileCache
from farm.jobs.ndk import Linker, linker_for
from farm.jobs.params import DeviceKind, GemmParams, GemmSchedule, TimingParams, TrackerParams
from farm.jobs.session import (
    ThreadPoolApplied,
    apply_thread_pool,
    open_session,
    upload_and_load,
)
from farm.jobs.targets import runtime_device_name, work_group_limit
from farm.jobs.tvm_errors import reason_of
from farm.sampling import SamplingRule, WarmUp, take_samples

log = structlog.get_logger(__name__)

#: Bump when a schedule below changes, so cached libraries are rebuilt.
SCHEDULE_VERSION = "v1"

#: (rtol, atol) of the check against numpy, by dtype. float16 accumulates in
#: float16, so its error grows with N; integers must match exactly.
_TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (1e-3, 1e-3),
    "float64": (1e-7, 1e-7),
    "float16": (5e-2, 5e-1),
}


@dataclass(frozen=True)
class GemmResult:
    """One GEMM benchmark on one phone.

    Attributes:
        n: matrix side N.
        dtype: element type.
        bn: block size (unused by the naive schedule).
        device: processor that ran it.
        schedule: ``tiled`` or ``naive``.
        target: the compile target dict.
        samples_s: every ``time_evaluator`` repeat, mean seconds per run.
        mean_s: mean of ``samples_s``.
        gflops: ``2 N^3 / mean_s / 1e9``.
        max_abs_err: largest ``|C - A @ B|`` against numpy.
        threads: thread pool settings in force (None for GPU runs).
        library: the cached ``.so`` that ran.
        warmup: the warm-up runs thrown away before ``samples_s``
            (:func:`farm.sampling.warm_up`); None when not warmed up.
        ci_pct: width of the 95% CI of the samples' median, % of it; None when
            the samples were a fixed number.
    """

    n: int
    dtype: str
    bn: int
    device: str
    schedule: str
    target: dict[str, Any]
    samples_s: list[float]
    mean_s: float
    gflops: float
    max_abs_err: float
    threads: ThreadPoolApplied | None
    library: str
    warmup: WarmUp | None = None
    ci_pct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the result."""
        return asdict(self)


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


def _random_inputs(n: int, dtype: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if dtype.startswith(("int", "uint")):
        return (
            rng.integers(0, 8, size=(n, n)).astype(dtype),
            rng.integers(0, 8, size=(n, n)).astype(dtype),
        )
    return rng.random((n, n)).astype(dtype), rng.random((n, n)).astype(dtype)


@dataclass
class LoadedGemm:
    """A GEMM built, uploaded and checked on one phone, ready to be timed over one session.

    Create it with :func:`load_gemm`; :meth:`time` may be called many times
    (the benchmarks and the comparison tests time it between changes of the
    phone's speed without a new session each time).

    Attributes:
        params: the workload and schedule.
        phone: the serial (or ``key:<tracker key>``) to name in errors.
        max_abs_err: largest ``|C - A @ B|`` against numpy.
        threads: thread pool settings in force (None for GPU runs).
        library: the cached ``.so`` that runs.
    """

    params: GemmParams
    phone: str
    max_abs_err: float
    threads: ThreadPoolApplied | None
    library: Path
    _remote: Any
    _module: Any
    _dev: Any
    _args: tuple[Any, Any, Any]

    def time(self, timing: TimingParams | None = None) -> list[float]:
        """Time the kernel with ``time_evaluator``; ``timing`` defaults to the params'.

        Returns:
            One mean seconds-per-run per repeat.

        Raises:
            SessionError: the session failed.
        """
        timing = timing or self.params.timing
        try:
            evaluator = self._module.time_evaluator(
                "gemm",
                self._dev,
                number=timing.number,
                repeat=timing.repeat,
                min_repeat_ms=timing.min_repeat_ms,
            )
            return [float(s) for s in evaluator(*self._args).results]
        except (RuntimeError, OSError) as exc:
            raise SessionError(self.phone, f"gemm run failed: {exc}") from exc


def load_gemm(
    params: GemmParams,
    target: dict[str, Any],
    tracker: TrackerParams,
    cache: CompileCache,
    *,
    seed: int = 0,
    remote: Any = None,
) -> LoadedGemm:
    """Build (or reuse), upload and check GEMM on the phone serving ``tracker.key``.

    Args:
        params: the workload, schedule, timing and thread pool settings.
        target: target dict for the phone.
        tracker: where to get the RPC session.
        cache: the compile cache.
        seed: seed of the random inputs.
        remote: an open session to load it in (an A/B job loads two GEMMs in
            one); None opens one through ``tracker``.

    Returns:
        The loaded kernel, its output checked against numpy, not yet timed.

    Raises:
        SpecError, ToolMissing, CompileError: the job cannot be built (never retried).
        CompileError: C differs from numpy beyond the dtype's tolerance.
        SessionError, TrackerUnreachable: the session failed (retried elsewhere).
    """
    import tvm

    linker = linker_for(target)  # before compiling: fail fast on a missing NDK
    library = build_gemm(params, target, cache, linker)
    remote = remote if remote is not None else open_session(tracker)
    phone = tracker.serial or f"key:{tracker.key}"
    threads = None
    if params.device is DeviceKind.CPU:
        threads = apply_thread_pool(remote, params.threads, tracker)
    module = upload_and_load(remote, library, f"gemm-{library.parent.name[:16]}.so", tracker)
    a_np, b_np = _random_inputs(params.n, params.dtype, seed)
    try:
        dev = remote.device(runtime_device_name(target), 0)
        a = tvm.runtime.tensor(a_np, dev)
        b = tvm.runtime.tensor(b_np, dev)
        c = tvm.runtime.tensor(np.zeros((params.n, params.n), params.dtype), dev)
        module["gemm"](a, b, c)
        c_np = c.numpy()
    except (RuntimeError, OSError) as exc:
        raise SessionError(phone, f"gemm run failed: {exc}") from exc
    expected = a_np.astype("float64") @ b_np.astype("float64")
    max_abs_err = float(np.max(np.abs(c_np.astype("float64") - expected)))
    rtol, atol = _TOLERANCE.get(params.dtype, (0.0, 0.0))
    if not np.allclose(c_np.astype("float64"), expected, rtol=rtol, atol=atol):
        raise CompileError(
            f"gemm n={params.n} dtype={params.dtype}",
            f"result differs from numpy on {phone}: max |error| {max_abs_err:g}",
        )
    return LoadedGemm(params, phone, max_abs_err, threads, library, remote, module, dev, (a, b, c))


def run_gemm(
    params: GemmParams,
    target: dict[str, Any],
    tracker: TrackerParams,
    cache: CompileCache,
    *,
    seed: int = 0,
    sampling: SamplingRule | None = None,
) -> GemmResult:
    """Build (or reuse), upload, check and time GEMM on the phone serving ``tracker.key``.

    Args:
        params: the workload, schedule, timing and thread pool settings.
        target: target dict for the phone.
        tracker: where to get the RPC session.
        cache: the compile cache.
        seed: seed of the random inputs.
        sampling: warm up, then take samples until the median is known
            (:func:`farm.sampling.take_samples`, at least
            ``params.timing.repeat``); None takes exactly ``repeat``, unwarmed.

    Returns:
        The result with every raw sample.

    Raises:
        SpecError, ToolMissing, CompileError: the job cannot be built (never retried).
        CompileError: C differs from numpy beyond the dtype's tolerance.
        SessionError, TrackerUnreachable: the session failed (retried elsewhere).
    """
    loaded = load_gemm(params, target, tracker, cache, seed=seed)
    warmup = ci_pct = None
    if sampling is None:
        samples_s = loaded.time()
    else:
        timing = params.timing
        sampled = take_samples(lambda repeat: loaded.time(replace(timing, repeat=repeat)),
                               sampling, at_least=timing.repeat)
        samples_s, warmup, ci_pct = sampled.samples_s, sampled.warmup, sampled.ci_pct
    mean_s = float(np.mean(samples_s))
    result = GemmResult(
        n=params.n,
        dtype=params.dtype,
        bn=params.bn,
        device=params.device.value,
        schedule=params.schedule.value,
        target=target,
        samples_s=samples_s,
        mean_s=mean_s,
        gflops=gemm_flop(params.n) / mean_s / 1e9,
        max_abs_err=loaded.max_abs_err,
        threads=loaded.threads,
        library=str(loaded.library),
        warmup=warmup,
        ci_pct=ci_pct,
    )
    log.info(
        "gemm_measured",
        serial=tracker.serial,
        n=params.n,
        schedule=params.schedule.value,
        gflops=round(result.gflops, 3),
        mean_s=mean_s,
    )
    return result
