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

Builds run in MetaSchedule's ``LocalBuilder`` worker processes. On a 2-core host
its 30 s default timeout fails every build, because each worker first imports
``tvm.s_tir.tensor_intrin`` (tens of seconds, a few through
:func:`farm.jobs.tvmscript.import_light`); farm gives it a long timeout and
an ``initializer`` doing those imports once per worker (apache/tvm
``python/tvm/s_tir/meta_schedule/builder/local_builder.py`` documents registering
functions "via initializer"). Candidates are exported as ``.so`` (NDK-linked for
real phones) since the phone's RPC server loads shared libraries.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
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
    ThreadPoolSession,
    apply_thread_pool,
    connect_fresh,
    open_session,
    upload_and_load,
)
from farm.jobs.targets import runtime_device_name
from farm.jobs.tuning_db import best_record_s, count_trials, open_database, repair_work_dir
from farm.jobs.tvm_errors import reason_of
from farm.tuning.progress import TaskProgress, TuneProgress

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


# --- the builder's worker processes -------------------------------------------------


def builder_initializer() -> None:
    """Run once in each LocalBuilder worker: the slow imports, before any build's timeout."""
    import tvm.support.ndk  # noqa: F401

    from farm.jobs.tvmscript import import_light

    import_light()


@dataclass(frozen=True)
class SoExporter:
    """MetaSchedule ``f_export``: a built candidate to a ``.so`` path (picklable).

    Attributes:
        linker: links the library.
        path: where the library goes; None: a fresh temporary folder each call.
    """

    linker: Linker
    path: str | None = None

    def to(self, path: str) -> SoExporter:
        """This exporter writing to ``path`` (a pipelined build's)."""
        return replace(self, path=path)

    def __call__(self, module: Any) -> str:
        """Export ``module`` to its ``.so`` and return the path.

        With a ``path`` given, the library is written beside it and renamed
        into place, so a runner waiting for ``path`` never loads half a file.
        """
        if self.path is None:
            path = Path(tempfile.mkdtemp(prefix="farm-ms-")) / "tvm_tmp_mod.so"
            module.export_library(str(path), fcompile=self.linker)
            return str(path)
        partial = f"{self.path}.partial.so"
        module.export_library(partial, fcompile=self.linker)
        os.replace(partial, self.path)
        return self.path


def warmup_samples(trials: int) -> int:
    """The results MetaSchedule's ``XGBModel`` takes before it predicts, for a run of ``trials``.

    Until it holds ``num_warmup_samples`` results (100 by default, which is a
    whole small budget) it scores candidates at random; farm has it predict
    after a tenth of the run's trials, 8 at least and 100 at most.

    >>> warmup_samples(16), warmup_samples(300), warmup_samples(5000)
    (8, 30, 100)
    """
    return min(100, max(8, trials // 10))


def cost_model(trials: int | None = None) -> Any:
    """MetaSchedule's cost model: XGBoost (a dependency), random if xgboost cannot load.

    Args:
        trials: the run's measured trials, which set when the model starts to
            predict (:func:`warmup_samples`); None: MetaSchedule's default model.

    Returns:
        An ``XGBModel``, ``"xgb"`` (with ``trials`` None) or ``"random"``.
    """
    # Without xgboost a random model still explores (more slowly) instead of
    # failing at the first update.
    try:
        import xgboost  # noqa: F401
    except ImportError:
        log.warning("tuning_cost_model_random", reason="xgboost is not installed")
        return "random"
    if trials is None:
        return "xgb"
    from tvm.s_tir import meta_schedule as ms

    return ms.cost_model.XGBModel(num_warmup_samples=warmup_samples(trials))


# --- tuning -------------------------------------------------------------------------


def _batch_counter(progress: TuneProgress, on_batch: Callable[[], None]) -> Any:
    """A MetaSchedule measure callback adding one batch per call to ``progress``.

    MetaSchedule calls its measure callbacks once per measured batch, after
    ``AddToDatabase`` wrote its records (apache/tvm
    ``python/tvm/s_tir/meta_schedule/measure_callback/measure_callback.py``), so
    ``on_batch`` may read the records file.
    """
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class BatchCounter(PyMeasureCallback):
        """Counts measured batches; TVM calls ``apply`` with positional arguments."""

        def apply(self, _task_scheduler: Any, _task_id: int, _measure_candidates: Any,
                  _builder_results: Any, _runner_results: Any) -> None:
            """One batch of candidates was measured: count it."""
            progress.add(batches=1)
            on_batch()

    return BatchCounter()


def measure_callbacks(progress: TuneProgress, on_batch: Callable[[], None]) -> list[Any]:
    """MetaSchedule's default measure callbacks, farm's batch counter right after ``AddToDatabase``.

    The counter is saved as soon as the batch's records are, before
    ``UpdateCostModel`` retrains XGBoost (seconds on a busy host): a farmd
    killed in between would otherwise keep the records but lose the batch.
    """
    from tvm.s_tir import meta_schedule as ms

    callbacks = list(ms.measure_callback.MeasureCallback.create("default"))
    after = next((i + 1 for i, c in enumerate(callbacks)
                  if isinstance(c, ms.measure_callback.AddToDatabase)), len(callbacks))
    callbacks.insert(after, _batch_counter(progress, on_batch))
    return callbacks


def builder_and_runner(
    params: TuneParams, tracker: TrackerParams, linker: Linker, *, warm: bool = False,
    on_built: Callable[[], None] | None = None,
) -> tuple[Any, Any]:
    """MetaSchedule's builder (host, ``.so`` per candidate) and runner (the tracker's key).

    Candidates are timed with the job's thread pool settings
    (:class:`farm.jobs.session.ThreadPoolSession`), as its untuned and tuned timings are.

    Args:
        params: builder and timing settings, the work folder.
        tracker: the tracker and the key the phones serve.
        linker: links each candidate's ``.so``.
        warm: one pool of build processes started now and kept for the whole
            run (:func:`farm.tuning.builder.warm_builder`, pipelined with
            ``params.pipeline``: the runner waits for each library), and each session
            and upload timed into the work folder (:class:`farm.tuning.rate.TimedSession`,
            :class:`farm.tuning.rate.TimedUpload`);
            False: MetaSchedule's ``LocalBuilder`` (a fresh pool per batch).
        on_built: called after each build call of the warm builder (a batch built).

    Returns:
        ``(builder, RPCRunner)``.
    """
    from tvm.s_tir import meta_schedule as ms

    from farm.tuning.builder import warm_builder
    from farm.tuning.rate import MEASURE_UNTIL_FILE, UPLOADS_FILE, TimedSession, TimedUpload

    if warm:
        builder = warm_builder(params.builder_workers, params.builder_timeout_s,
                               SoExporter(linker), builder_initializer, on_built=on_built,
                               pipeline=params.pipeline)
    else:
        builder = ms.builder.LocalBuilder(
            max_workers=params.builder_workers,
            timeout_sec=params.builder_timeout_s,
            f_export=SoExporter(linker),
            initializer=builder_initializer,
        )
    upload = TimedUpload(str(params.work_dir / UPLOADS_FILE),
                         params.builder_timeout_s if params.pipeline else 0.0,
                         str(params.work_dir / MEASURE_UNTIL_FILE)) if warm else None
    workload = params.model if params.model is not None else params.gemm
    threads = connect_fresh if workload is None else ThreadPoolSession(
        workload.threads.affinity_mode, workload.threads.num_threads)
    session = threads if not warm else TimedSession(str(params.work_dir / UPLOADS_FILE), threads)
    runner = ms.runner.RPCRunner(
        ms.runner.RPCConfig(
            tracker_host=tracker.host,
            tracker_port=tracker.port,
            tracker_key=tracker.key,
            session_timeout_sec=int(tracker.session_timeout_s),
        ),
        evaluator_config=ms.runner.EvaluatorConfig(
            number=params.timing.number,
            repeat=params.timing.repeat,
            min_repeat_ms=params.timing.min_repeat_ms,
        ),
        max_workers=params.runner_workers,
        f_create_session=session,
        f_upload_module=upload,
    )
    return builder, runner


def tune_in_rounds(
    params: TuneParams, asked: int, measured: Callable[[], int],
    tune_round: Callable[[int], bool | None], progress: TuneProgress,
    expired: Callable[[], bool] = lambda: False,
) -> int:
    """Run ``tune_round(remaining)`` until ``asked`` trials are measured or rounds run out.

    MetaSchedule counts trials from 0 in every run, measured or failed; farm asks
    each round only for the trials still missing, so no measured trial is
    measured again and a failed one is made up for (up to ``params.max_rounds``).
    A round that says its tasks ran dry (every search came up empty) is the
    last: the small CNN's max pool, out of new candidates at 89 of its 250
    trials, took 3 more rounds of empty searches (28 s) before its job went on.

    Args:
        params: the work folder and ``max_rounds``.
        asked: measured trials wanted.
        measured: reads the trials measured so far from the (repaired) work folder.
        tune_round: one MetaSchedule run asking for that many trials; it returns
            False when its searches sent no candidate (None: not known).
        progress: counts the rounds.
        expired: True once the time budget is spent: no further round starts.

    Returns:
        The rounds run.
    """
    done, rounds = measured(), 0
    while done < asked and rounds < params.max_rounds and not expired():
        log.info("tuning_round", round=rounds, measured=done, remaining=asked - done)
        sent = tune_round(asked - done)
        rounds += 1
        progress.add(rounds=1)
        repair_work_dir(params.work_dir)
        done = measured()
        if sent is False:
            log.info("tuning_tasks_ran_dry", measured=done, remaining=asked - done)
            break
    return rounds


def drop_unnamed_ms_handlers() -> None:
    """Remove handlers without a name from MetaSchedule's logger.

    TVM's ``create_loggers`` (tvm/s_tir/meta_schedule/logging.py) lists that
    logger's handlers by name in a ``dictConfig`` and fails (``None.format``)
    on one without a name. One is left behind after a ``tune_tir`` has run
    in the same process (seen running a model tuning, then a GEMM tuning,
    and the other way round, in one test process); an attempt child tunes
    once, so only a process that tunes twice meets it. Every tuning entry
    point calls this before MetaSchedule makes its loggers.
    """
    import logging

    ms_logger = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in list(ms_logger.handlers):
        if handler.get_name() is None:
            ms_logger.removeHandler(handler)


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
