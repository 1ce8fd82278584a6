"""MetaSchedule tuning of the GEMM workload across every phone serving a tracker key.

A tuning job owns a work folder holding MetaSchedule's JSON database::

    <work_dir>/database_workload.json       one line per workload
    <work_dir>/database_tuning_record.json  one line per measured candidate
    <work_dir>/logs/                        MetaSchedule's own logs
    <work_dir>/tuned.so, untuned.so         the final comparison's libraries
    <work_dir>/farm_progress.json           farm's counters (farm.tuning.progress)

Checkpointing is MetaSchedule's: each measured candidate is appended as one line.
Resuming is farm's: MetaSchedule's task scheduler starts counting trials at 0 even
when the database already holds records, so before a run farm trims a half-written
last line (a kill mid-write), counts the trials already *measured* and asks only
for the rest. A measurement that failed (the app crashed, the session dropped) is
recorded by MetaSchedule with a run time of 1e10 s and does not count, so farm runs
further rounds, up to ``max_rounds``, until the requested number is measured.

The builder, runner and rounds are :mod:`farm.tuning.rounds`'s, shared with a model's tuning.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from farm.errors import CompileError, SessionError, SpecError
from farm.jobs.gemm import gemm_flop, gemm_module, schedule_gpu
from farm.jobs.ndk import Linker, linker_for
from farm.jobs.params import GemmParams, TrackerParams, TuneParams
from farm.jobs.session import (
    ThreadPoolApplied,
    apply_thread_pool,
    open_session,
    upload_and_load,
)
from farm.jobs.targets import runtime_device_name
from farm.jobs.tuning_db import best_record_s, count_trials, open_database, repair_work_dir
from farm.jobs.tvm_errors import reason_of
from farm.tuning.counters import TaskProgress
from farm.tuning.progress import TuneProgress
from farm.tuning.rounds import (
    builder_and_runner,
    cost_model,
    drop_unnamed_ms_handlers,
    measure_callbacks,
    tune_in_rounds,
)

log = structlog.get_logger(__name__)

#: The function name MetaSchedule's ``compile_tir`` looks the workload up by.
FUNC_NAME = "main"


@dataclass(frozen=True)
class TuneResult:
    """A finished tuning run: what the work folder holds and what it took.

    The counters ``attempts``, ``rounds``, ``batches`` and ``app_relaunches`` add up
    every run on the work folder (:mod:`farm.tuning.progress`), so they stay
    right when a job resumes after a killed attempt.

    Attributes:
        trials_requested: measured trials the job asked for in total.
        trials_measured_before: measured trials found in the work folder at start.
        trials_measured: measured trials in the work folder at the end.
        trials_failed: records whose measurement failed (crashes, dropped sessions).
        attempts: tuning runs on the work folder, this one included.
        rounds: MetaSchedule runs, over all attempts.
        batches: measured batches, over all attempts.
        app_relaunches: serials relaunched after an app crash, over all attempts.
        best_record_s: the best candidate's mean run time while tuning.
        tuned_library: the best schedule, compiled (``.so``).
        untuned_library: the unscheduled kernel (on a GPU: the plain ``bn x bn``
            thread-block schedule), compiled (``.so``).
        work_dir: the work folder.
        target: the target dict.
    """

    trials_requested: int
    trials_measured_before: int
    trials_measured: int
    trials_failed: int
    attempts: int
    rounds: int
    batches: int
    app_relaunches: list[str]
    best_record_s: float
    tuned_library: str
    untuned_library: str
    work_dir: str
    target: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the result."""
        return asdict(self)


@dataclass(frozen=True)
class Comparison:
    """The untuned and the tuned kernel timed on one phone, in one session.

    Attributes:
        serial: the phone that produced every sample here.
        untuned_samples_s: time_evaluator samples of the untuned baseline (see ``_compile_pair``).
        tuned_samples_s: time_evaluator samples of the best schedule.
        speedup: mean untuned time over mean tuned time.
        tuned_gflops: ``2 N^3 / mean tuned time / 1e9``.
        threads: thread pool settings in force (None on a GPU).
    """

    serial: str
    untuned_samples_s: list[float]
    tuned_samples_s: list[float]
    speedup: float
    tuned_gflops: float
    threads: ThreadPoolApplied | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the comparison."""
        return asdict(self)


def _tune_round(
    params: TuneParams, target: dict[str, Any], tracker: TrackerParams, linker: Linker,
    trials: int, progress: TuneProgress, on_batch: Callable[[], None],
) -> None:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from farm.jobs.tvmscript import import_light

    import_light()  # what tune_tir's TuneContext imports first, in seconds
    builder, runner = builder_and_runner(params, tracker, linker)
    gemm = _gemm_of(params)
    mod = gemm_module(gemm.n, gemm.dtype, name=FUNC_NAME)
    drop_unnamed_ms_handlers()
    ms.tune_tir(
        mod,
        tvm.target.Target(target),
        str(params.work_dir),
        max_trials_global=trials,
        num_trials_per_iter=min(params.trials_per_iter, trials),
        builder=builder,
        runner=runner,
        cost_model=cost_model(),
        measure_callbacks=measure_callbacks(progress, on_batch),
        seed=params.seed,
    )


def _gemm_of(params: TuneParams) -> GemmParams:
    if params.gemm is None:
        raise SpecError("params.gemm", "tuning the GEMM needs a GEMM workload")
    return params.gemm


def gemm_label(gemm: GemmParams) -> str:
    """The GEMM's workload label, e.g. ``gemm n=512 dtype=float32``."""
    return f"gemm n={gemm.n} dtype={gemm.dtype}"


def _compile_pair(params: TuneParams, target: dict[str, Any], linker: Linker) -> tuple[Path, Path]:
    """Compile the best recorded schedule and the untuned baseline into the work folder.

    The baseline is the unscheduled kernel on a CPU. On a GPU it is the plain
    ``bn x bn`` thread-block schedule (:func:`farm.jobs.gemm.schedule_gpu`): TVM
    0.27 compiles an unscheduled function for a GPU target into host code that
    reads the device's buffers, which crashed the RPC server of an H100 host.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms

    gemm = _gemm_of(params)
    workload = gemm_label(gemm)
    mod = gemm_module(gemm.n, gemm.dtype, name=FUNC_NAME)
    target_obj = tvm.target.Target(target)
    database = open_database(params.work_dir)
    schedule = ms.tir_integration.compile_tir(database, mod, target_obj)
    if schedule is None:
        raise CompileError(workload, "no measured schedule in the tuning records")
    tuned = params.work_dir / "tuned.so"
    untuned = params.work_dir / "untuned.so"
    baseline = mod if target.get("kind") == "llvm" else schedule_gpu(mod, gemm.bn, FUNC_NAME)
    try:
        for out, scheduled in ((tuned, schedule.mod), (untuned, baseline)):
            tmp = out.with_suffix(".tmp.so")
            tvm.compile(scheduled, target=target_obj).export_library(str(tmp), fcompile=linker)
            os.replace(tmp, out)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise CompileError(workload, reason_of(exc)) from exc
    return tuned, untuned


def compare_tuned(
    params: TuneParams, target: dict[str, Any], tracker: TrackerParams, result: TuneResult
) -> Comparison:
    """Time the untuned and the tuned kernel of ``result`` on one phone, in one session.

    Args:
        params: the workload and its timing settings.
        target: the target the libraries were built for.
        tracker: a key only the phone to time serves; ``tracker.serial`` names it.
        result: a finished :func:`tune_gemm`.

    Returns:
        The samples, all produced by ``tracker.serial``.

    Raises:
        SessionError, TrackerUnreachable: no session, or the session failed.
    """
    import tvm

    remote = open_session(tracker)
    serial = tracker.serial or f"key:{tracker.key}"
    device = runtime_device_name(target)
    gemm = _gemm_of(params)
    threads = apply_thread_pool(remote, gemm.threads, tracker) if device == "cpu" else None
    rng = np.random.default_rng(0)
    n, dtype = gemm.n, gemm.dtype
    samples: list[list[float]] = []
    for name, library in (("untuned", result.untuned_library), ("tuned", result.tuned_library)):
        module = upload_and_load(remote, Path(library), f"{name}-{os.getpid()}.so", tracker)
        try:
            dev = remote.device(device, 0)
            a = tvm.runtime.tensor(rng.random((n, n)).astype(dtype), dev)
            b = tvm.runtime.tensor(rng.random((n, n)).astype(dtype), dev)
            c = tvm.runtime.tensor(np.zeros((n, n), dtype), dev)
            timing = gemm.timing
            evaluator = module.time_evaluator(
                FUNC_NAME,
                dev,
                number=timing.number,
                repeat=timing.repeat,
                min_repeat_ms=timing.min_repeat_ms,
            )
            samples.append([float(s) for s in evaluator(a, b, c).results])
        except (RuntimeError, OSError) as exc:
            raise SessionError(serial, str(exc)) from exc
    untuned_s, tuned_s = samples
    tuned_mean = float(np.mean(tuned_s))
    comparison = Comparison(
        serial=serial,
        untuned_samples_s=untuned_s,
        tuned_samples_s=tuned_s,
        speedup=float(np.mean(untuned_s)) / tuned_mean,
        tuned_gflops=gemm_flop(n) / tuned_mean / 1e9,
        threads=threads,
    )
    log.info("tuning_compared", serial=serial, speedup=round(comparison.speedup, 3))
    return comparison


def tune_gemm(
    params: TuneParams, target: dict[str, Any], tracker: TrackerParams,
    progress: TuneProgress | None = None,
) -> TuneResult:
    """Tune GEMM until ``params.trials`` trials are measured; compile the best and the untuned.

    Reusing ``params.work_dir`` resumes: trials measured by earlier (possibly killed)
    runs count towards ``params.trials``, and so do the counters of
    :mod:`farm.tuning.progress`.

    Args:
        params: workload, trial budget, work folder, builder and timing settings.
        target: target dict the phones serving ``tracker.key`` share.
        tracker: tracker address and the key only this job's phones serve.
        progress: the work folder's counters; opened here when None (the runner
            passes its own, which also counts the app relaunches).

    Returns:
        Trial counts, the counters over all attempts and the compiled libraries;
        time them with :func:`compare_tuned`.

    Raises:
        SpecError: a CPU target without ``num-cores``.
        ToolMissing: the NDK is needed and missing (checked before anything runs).
        CompileError: no candidate could be built or measured in ``max_rounds`` rounds.
    """
    if target.get("kind") == "llvm" and not target.get("num-cores"):
        # MetaSchedule sizes parallel loops by it and refuses a CPU target without it.
        raise SpecError("device.num_cores", "tuning a CPU target needs the phone's core count")
    gemm = _gemm_of(params)
    linker = linker_for(target)
    params.work_dir.mkdir(parents=True, exist_ok=True)
    repair_work_dir(params.work_dir)
    progress = progress or TuneProgress(params.work_dir)
    progress.add(attempts=1)
    before, _ = count_trials(params.work_dir)
    label = gemm_label(gemm)
    progress.set_tasks([TaskProgress(label, 0, params.trials, before)])

    def on_batch() -> None:
        progress.update_task(label, count_trials(params.work_dir)[0],
                             best_record_s(params.work_dir))

    rounds = tune_in_rounds(
        params, params.trials, lambda: count_trials(params.work_dir)[0],
        lambda remaining: _tune_round(params, target, tracker, linker, remaining, progress,
                                      on_batch),
        progress)
    measured, failed = count_trials(params.work_dir)
    on_batch()
    if measured == 0:
        raise CompileError(label, f"no trial measured in {rounds} rounds ({failed} failed)")
    tuned, untuned = _compile_pair(params, target, linker)
    counters = progress.counters
    log.info("tuning_finished", measured=measured, failed=failed, rounds=counters.rounds,
             batches=counters.batches, attempts=counters.attempts)
    return TuneResult(
        trials_requested=params.trials,
        trials_measured_before=before,
        trials_measured=measured,
        trials_failed=failed,
        attempts=counters.attempts,
        rounds=counters.rounds,
        batches=counters.batches,
        app_relaunches=list(counters.app_relaunches),
        best_record_s=best_record_s(params.work_dir),
        tuned_library=str(tuned),
        untuned_library=str(untuned),
        work_dir=str(params.work_dir),
        target=target,
    )
