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

The kernel, its schedules and its build are :mod:`farm.jobs.gemm_build`; this
module runs the build on a phone, and callers import every name from here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from farm.errors import CompileError, SessionError
from farm.jobs.cache import CompileCache
from farm.jobs.gemm_build import (
    SCHEDULE_VERSION,
    build_gemm,
    cache_key,
    check_params,
    gemm_flop,
    gemm_module,
    schedule_cpu,
    schedule_gpu,
)
from farm.jobs.ndk import linker_for
from farm.jobs.params import DeviceKind, GemmParams, TimingParams, TrackerParams
from farm.jobs.session import (
    ThreadPoolApplied,
    apply_thread_pool,
    open_session,
    upload_and_load,
)
from farm.jobs.targets import runtime_device_name
from farm.sampling import SamplingRule, WarmUp, take_samples

#: The GEMM job's names: the kernel, its schedules and build (``gemm_build``), and
#: running it on a phone (here).
__all__ = [
    "SCHEDULE_VERSION",
    "GemmResult",
    "LoadedGemm",
    "build_gemm",
    "cache_key",
    "check_params",
    "gemm_flop",
    "gemm_module",
    "load_gemm",
    "run_gemm",
    "schedule_cpu",
    "schedule_gpu",
]

log = structlog.get_logger(__name__)

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
