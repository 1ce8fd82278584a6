"""MetaSchedule tuning of an ONNX model's tasks across every phone serving a tracker key.

The model goes ONNX -> Relax -> fused TIR functions exactly as the ``model``
job compiles it (:func:`farm.jobs.model.relax_module`,
:func:`farm.jobs.model.tunable_module`: the passes ``compile_relax`` runs before
it applies a database), so the tasks extracted here are the workloads the
tuned build looks up. Tasks are ranked heaviest first (FLOPs times the
times they occur) and capped at ``max_tasks``.

Each round first measures the default schedule of every task that has
trials left and no such record yet (:mod:`farm.jobs.tune_baseline`): one of
the task's trials, recorded like any candidate, so that the tuned build
applies a tuning record only where it beat farm's default schedule on the
job's phones, and the job has its first measured trials before MetaSchedule's
search has proposed any.

All tasks are tuned in one MetaSchedule run (``tune_tasks`` with the gradient
task scheduler, XGBoost cost model) into the one work folder database
(:mod:`farm.jobs.tune` describes the folder and the runner set-up, shared with
the GEMM tuning). :mod:`farm.jobs.tune_search` plans each task's trials (one
batch at least, the rest by its share of the model's FLOPs), sizes the
evolutionary search to them, and wraps it so that a resumed run sends no
trace already measured. Resuming counts each task's measured trials in the
work folder (its records are found by its workload's line in
``database_workload.json``) and asks MetaSchedule only for the missing ones,
in rounds (:func:`farm.jobs.tune.tune_in_rounds`) that make up for failed
measurements; a task already complete costs nothing. A time budget
(``for_s``, tuning seconds over all attempts) stops the search: no batch is
sent after it, the batches in flight are recorded, and the model is built
with the records so far.

Given the fleet's best records (``fleet``, :mod:`farm.jobs.tune_seed`), each
task short of its trials first gets its workload's best records from earlier
tunings on the same target and device model, which count as measured: a task
whose stored records reach its trials measures nothing, and a task another
model shared starts from that model's best. Given a ``checkpoint``, the
records measured so far are handed on after every batch (farmd keeps them in
the fleet's database), so an attempt retried on another host, with an empty
work folder, starts from them and measures none of them again.

The build processes start first, in the background
(:mod:`farm.jobs.tune_builder`), and stay for the whole run; the progress file
names the phase and lists the tasks as soon as they are extracted.

At the end the model is compiled with the database applied, by the ``model``
job's own build (:func:`farm.jobs.model.build_model` with ``database_dir``,
linked for the phones, NDK for real ones), and copied to
``<work_dir>/model_tuned.so``. Before that, on CPU targets, each task whose
best record is a searched candidate has it measured again against its
default schedule, interleaved, and the record is applied only where it is
faster by more than the measurements' spread (:mod:`farm.jobs.tune_verify`):
the least of a few noisy measurements is often a candidate that was measured
fast once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from farm.errors import CompileError, SpecError
from farm.jobs.cache import CompileCache
from farm.jobs.model import ModelInput, build_model, load_model, relax_module, tunable_module
from farm.jobs.ndk import Linker, linker_for
from farm.jobs.params import ModelParams, TrackerParams, TuneParams
from farm.jobs.tune import (
    builder_and_runner,
    cost_model,
    drop_unnamed_ms_handlers,
    measure_callbacks,
    tune_in_rounds,
)
from farm.jobs.tune_baseline import BaselineTask, measure_baselines, missing_baselines
from farm.jobs.tune_progress import TaskProgress, TuneProgress
from farm.jobs.tune_rate import limit_per_phone_hour, trials_per_phone_hour
from farm.jobs.tune_records import best_record_s, count_trials, repair_work_dir, workload_index
from farm.jobs.tune_search import (
    FarmSearch,
    measured_traces,
    plan_trials,
    search_settings,
)
from farm.jobs.tune_seed import BestRecords, seed_work_dir, target_key
from farm.jobs.tune_verify import Verdict, drop_picks, verify_picks

__all__ = ["TUNED_LIBRARY", "Checkpoint", "ModelTask", "ModelTuneResult", "compile_tuned",
           "keep_untuned",
           "model_tasks", "tune_model"]

log = structlog.get_logger(__name__)

#: The tuned model's library in the work folder (``farmctl export`` copies it).
TUNED_LIBRARY = "model_tuned.so"


#: Called after each measured batch with each task's name by its workload
#: index; it may read the work folder's records, complete up to that batch.
Checkpoint = Callable[[Mapping[int, str]], None]


@dataclass(frozen=True)
class ModelTask:
    """One tunable task of a model.

    Attributes:
        name: MetaSchedule's task name, e.g. ``"fused_conv2d_add_relu"``.
        weight: how many times the model calls it.
        flop: floating point operations of one call (``estimate_tir_flops``).
        extracted: MetaSchedule's ``ExtractedTask``.
    """

    name: str
    weight: int
    flop: float
    extracted: Any


@dataclass(frozen=True)
class TaskResult:
    """One task's trials at the end of tuning.

    Attributes:
        name: the task name.
        workload_index: its workload's line in ``database_workload.json``.
        trials: measured trials asked.
        trials_measured: measured trials recorded.
        best_s: the best candidate's mean run time in seconds (inf: none measured).
    """

    name: str
    workload_index: int
    trials: int
    trials_measured: int
    best_s: float


@dataclass(frozen=True)
class ModelTuneResult:
    """A finished model tuning run.

    Attributes:
        model_sha256: hex digest of the model file.
        inputs: the graph inputs as tuned.
        tasks: each tuned task, in tuning order.
        trials_requested: measured trials asked over all tasks.
        trials_measured_before: measured trials of these tasks found at start.
        trials_measured: measured trials of these tasks at the end.
        trials_failed: records whose measurement failed (all tasks).
        tuned_library: ``<work_dir>/model_tuned.so``.
        work_dir: the work folder.
        target: the target dict.
        stopped_by: ``"trials"`` (all asked were measured), ``"time"`` (the
            time budget ran out) or ``"rounds"`` (``max_rounds`` ran out).
        tuning_s: tuning seconds over all attempts.
        first_trial_s: seconds from this attempt's start to its first measured
            trial (None: it measured none).
        trials_per_phone_hour: this attempt's measured trials per phone-hour.
        limit_per_phone_hour: the measurement-bound limit
            (:func:`farm.jobs.tune_rate.limit_per_phone_hour`).
        trials_from_fleet: records this attempt seeded from the fleet's
            (counted in ``trials_measured_before``).
        picks_checked: tasks whose best record (not their default schedule)
            was measured again against the default (:mod:`farm.jobs.tune_verify`);
            None: not checked (GPU targets).
        picks_used: of those, the records faster by more than the spread,
            which the tuned build applies; the other tasks keep the default.
    """

    model_sha256: str
    inputs: list[ModelInput]
    tasks: list[TaskResult]
    trials_requested: int
    trials_measured_before: int
    trials_measured: int
    trials_failed: int
    tuned_library: str
    work_dir: str
    target: dict[str, Any]
    stopped_by: str = "trials"
    tuning_s: float = 0.0
    first_trial_s: float | None = None
    trials_per_phone_hour: float | None = None
    limit_per_phone_hour: float | None = None
    trials_from_fleet: int = 0
    picks_checked: int | None = None
    picks_used: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (an unmeasured task's ``best_s`` is None)."""
        record = asdict(self)
        for task in record["tasks"]:
            if task["best_s"] == float("inf"):
                task["best_s"] = None
        return record


def _model_of(params: TuneParams) -> ModelParams:
    if params.model is None:
        raise SpecError("params.model", "tuning a model needs a model")
    return params.model


def _import(model: ModelParams) -> tuple[Any, list[ModelInput]]:
    """The model as a Relax ``IRModule`` and its inputs (:func:`farm.jobs.model.relax_module`).

    Raises:
        SpecError: the file or the shapes are invalid.
        CompileError: the frontend cannot import the model, even simplified.
    """
    onnx_model, inputs = load_model(model.model_path, model.input_shapes, model.shown_name)
    return relax_module(onnx_model, inputs, model.shown_name), inputs


def model_tasks(mod: Any, target: dict[str, Any]) -> list[ModelTask]:
    """The model's tunable tasks, heaviest (FLOPs x weight) first.

    Args:
        mod: the model's Relax module (:func:`farm.jobs.model.relax_module`).
        target: the target dict.

    Returns:
        Every task; ties keep MetaSchedule's order.
    """
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops
    from tvm.s_tir.meta_schedule.relax_integration import extract_tasks

    target_obj = tvm.target.Target(target)
    with tvm.transform.PassContext(opt_level=3):
        fused = tunable_module(mod, target_obj)
    tasks = [ModelTask(str(t.task_name), int(t.weight), float(estimate_tir_flops(t.dispatched[0])),
                       t) for t in extract_tasks(fused, target_obj)]
    return sorted(tasks, key=lambda t: -t.flop * t.weight)


def _task_workload(task: ModelTask, params: TuneParams) -> tuple[int, str]:
    """Commit the task's workload to the database (if new); return its line and structural hash.

    The workload is the module MetaSchedule tunes (``dispatched[0]``, what
    ``extracted_tasks_to_tune_contexts`` gives its ``TuneContext``).
    """
    from tvm.s_tir import meta_schedule as ms

    database = ms.database.JSONDatabase(work_dir=str(params.work_dir))
    shash = str(database.commit_workload(task.extracted.dispatched[0]).as_json()[0])
    index = workload_index(params.work_dir, shash)
    if index is None:  # commit_workload writes the line before it returns
        raise CompileError(task.name, "its workload is missing from the tuning database")
    return index, shash


@dataclass(frozen=True)
class _Planned:
    """A task in this run: its workload line, its planned trials and its workload's hash."""

    task: ModelTask
    index: int
    trials: int
    shash: str


def _contexts(planned: list[_Planned], caps: list[int], params: TuneParams,
              expired: Callable[[], bool]) -> tuple[list[Any], list[float]]:
    """MetaSchedule's ``TuneContext`` per task with a cap left, each with farm's search.

    As ``extracted_tasks_to_tune_contexts`` (apache/tvm
    ``python/tvm/s_tir/meta_schedule/relax_integration.py``) builds them, but
    each task with its own :func:`farm.jobs.tune_search.FarmSearch` (its cap
    and its recorded traces), which that function cannot give.
    """
    from tvm.s_tir.meta_schedule import TuneContext
    from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir
    from tvm.s_tir.meta_schedule.utils import fork_seed

    drop_unnamed_ms_handlers()
    recorded = measured_traces(params.work_dir)
    settings = search_settings(max(p.trials for p in planned))
    live = [(p, cap) for p, cap in zip(planned, caps, strict=True) if cap > 0]
    loggers = get_loggers_from_work_dir(str(params.work_dir), [p.task.name for p, _ in live])
    contexts, weights = [], []
    for (p, cap), logger, seed in zip(live, loggers, fork_seed(params.seed, n=len(live)),
                                      strict=True):
        strategy = FarmSearch(settings, recorded.get(p.index, set()), cap, expired)
        contexts.append(TuneContext(
            mod=p.task.extracted.dispatched[0], target=p.task.extracted.target,
            space_generator="post-order-apply", search_strategy=strategy,
            task_name=p.task.name, logger=logger, rand_state=seed, num_threads="physical",
        ).clone())
        weights.append(float(p.task.weight))
    return contexts, weights


def _import_tensor_intrin(progress: TuneProgress) -> None:
    """Import what MetaSchedule's ``TuneContext`` imports first, saying so in the progress.

    ``tvm.s_tir.tensor_intrin`` parses ~500 TVMScript functions; imported
    plainly it took 1 to 7 minutes in a process that has loaded farm (or
    pytest) on the loaded 2-core CI host, a few seconds through
    :func:`farm.jobs.tvmscript.import_light`. An attempt child forked from the
    zygote has it already (:data:`farm.runner.zygote.PRELOAD`); a cold one
    shows this phase instead of a silent first round.
    """
    import sys

    from farm.jobs.tvmscript import TENSOR_INTRIN, import_light

    if TENSOR_INTRIN not in sys.modules:
        progress.set_phase("importing TVM's tensor intrinsics")
        import_light(TENSOR_INTRIN)
    progress.set_phase("tuning")


def _measure_baselines(planned: list[_Planned], params: TuneParams, builder: Any, runner: Any,
                       progress: TuneProgress, on_batch: Callable[[], None]) -> None:
    """Measure the default schedule of each CPU task with trials left and none measured yet.

    The baseline is one of the task's trials (:mod:`farm.jobs.tune_baseline`).
    """
    left = [p for p, m in zip(planned, _measured(planned, params), strict=True)
            if m < p.trials and str(p.task.extracted.target.kind.name) == "llvm"]
    tasks = missing_baselines(_baseline_tasks(left), params.work_dir)
    if tasks:
        progress.set_phase("measuring the default schedules")
        measure_baselines(tasks, builder, runner, params.work_dir, params.builder_workers,
                          progress.expired, on_batch)


def _seed_from_fleet(planned: list[_Planned], params: TuneParams, target: dict[str, Any],
                     fleet: BestRecords) -> int:
    """Seed each task short of its trials with the fleet's best records.

    The records come through ``fleet`` and are appended by
    :func:`farm.jobs.tune_seed.seed_work_dir`; they count as measured trials.

    Returns:
        Records seeded.
    """
    import tvm

    short = [(p, p.trials - m) for p, m in zip(planned, _measured(planned, params), strict=True)
             if m < p.trials]
    if not short:
        return 0
    found = fleet(target_key(tvm.target.Target(target).export()),
                  {p.shash: p.trials for p, _ in short})
    seeded = seed_work_dir(params.work_dir, {p.index: found.get(p.shash, ()) for p, _ in short},
                           {p.index: left for p, left in short})
    log.info("tuning_seeded_from_fleet", records=seeded, tasks=len(short))
    return seeded


def _measured(planned: list[_Planned], params: TuneParams) -> list[int]:
    """Each task's measured trials in the work folder."""
    return [count_trials(params.work_dir, p.index)[0] for p in planned]


def _baseline_tasks(planned: list[_Planned]) -> list[BaselineTask]:
    return [BaselineTask(p.task.name, p.index, p.task.extracted.dispatched[0],
                         p.task.extracted.target) for p in planned]


def _tune_all(planned: list[_Planned], batch: int, params: TuneParams, tracker: TrackerParams,
              linker: Linker, progress: TuneProgress, checkpoint: Checkpoint | None,
              verdicts: list[Verdict] | None) -> str:
    """Tune the planned tasks together until each has its trials or the budget is spent.

    ``checkpoint`` (if any) is called after each measured batch, with each
    task's name by its workload index. Then, given a list in ``verdicts`` (CPU
    targets), each task's pick is measured again against its default schedule
    (:mod:`farm.jobs.tune_verify`, after the time budget too) and the verdicts
    appended.

    Returns:
        Why it stopped: ``"trials"``, ``"time"`` or ``"rounds"``.
    """
    from tvm.s_tir import meta_schedule as ms

    measurers: list[tuple[Any, Any]] = []  # started when first needed: none if nothing is measured
    asked = sum(p.trials for p in planned)
    start_s = progress.tuning_s()
    start_measured = sum(min(m, p.trials) for m, p in zip(_measured(planned, params), planned,
                                                          strict=True))

    def measured() -> int:
        return sum(min(m, p.trials) for m, p in zip(_measured(planned, params), planned,
                                                    strict=True))

    def on_batch() -> None:
        if checkpoint is not None:
            checkpoint({p.index: p.task.name for p in planned})
        counts = _measured(planned, params)
        for p, count in zip(planned, counts, strict=True):
            progress.update_task(p.task.name, count, best_record_s(params.work_dir, p.index))
        done = sum(min(m, p.trials) for m, p in zip(counts, planned, strict=True))
        progress.set_rate(
            trials_per_phone_hour(done - start_measured, progress.tuning_s() - start_s,
                                  params.runner_workers),
            limit_per_phone_hour(params.work_dir, params.timing))

    def started() -> tuple[Any, Any]:
        if not measurers:
            measurers.append(builder_and_runner(params, tracker, linker, warm=True))
        return measurers[0]

    def tune_round(_remaining: int) -> None:
        builder, runner = started()
        _measure_baselines(planned, params, builder, runner, progress, on_batch)
        caps = [max(0, p.trials - m) for p, m in zip(planned, _measured(planned, params),
                                                      strict=True)]
        if not any(caps) or progress.expired():
            return
        _import_tensor_intrin(progress)
        contexts, weights = _contexts(planned, caps, params, progress.expired)
        log.info("tuning_round_tasks", tasks=len(contexts), trials=sum(caps), batch=batch)
        ms.tune_tasks(
            tasks=contexts, task_weights=weights, work_dir=str(params.work_dir),
            max_trials_global=sum(caps), max_trials_per_task=max(caps),
            num_trials_per_iter=batch, builder=builder, runner=runner,
            cost_model=cost_model(asked), measure_callbacks=measure_callbacks(progress, on_batch),
            task_scheduler=ms.task_scheduler.GradientBased(seed=params.seed or -1),
        )

    try:
        tune_in_rounds(params, asked, measured, tune_round, progress, progress.expired)
        if verdicts is not None:
            progress.set_phase("checking each task's pick against its default schedule")
            verdicts += verify_picks(_baseline_tasks(planned), started, params.work_dir,
                                     params.verify_rounds)
    finally:
        for builder, _ in measurers:
            builder.shutdown()
    on_batch()
    if measured() >= asked:
        return "trials"
    return "time" if progress.expired() else "rounds"


def compile_tuned(
    model: ModelParams, target: dict[str, Any], work_dir: Path, cache: CompileCache,
    linker: Linker,
) -> Path:
    """The model compiled with the work folder's database applied, as ``model_tuned.so``.

    Built as the ``model`` job builds it (:func:`farm.jobs.model.build_model` with
    ``database_dir``: same linker, same compile cache entry), then copied into
    the work folder. On CPU targets a task gets its best record only where
    that record beat the default schedule when measured again
    (:mod:`farm.jobs.tune_verify`, ``<work_dir>/picked``); every other task
    keeps farm's default CPU schedule.

    Raises:
        CompileError: TVM could not compile or link it.
    """
    library, _ = build_model(replace(model, database_dir=work_dir), target, cache, linker)
    out = work_dir / TUNED_LIBRARY
    tmp = out.with_suffix(".tmp.so")
    shutil.copyfile(library, tmp)
    os.replace(tmp, out)
    return out


def keep_untuned(
    model: ModelParams, target: dict[str, Any], work_dir: Path, cache: CompileCache,
    linker: Linker,
) -> Path:
    """The untuned build as the job's best: for a tuned model not faster as a whole.

    Each kept record beat its task's default schedule alone, yet the model
    can still lose (caches shared between kernels, noise in the check): the
    job then reports the untuned build as its best. Every build "tuned by"
    ``work_dir`` (``model_tuned.so``, ``farmctl export``, ``--tuned``) is then
    the untuned one (:func:`farm.jobs.tune_verify.drop_picks`).

    Returns:
        ``<work_dir>/model_tuned.so``, now the untuned build.

    Raises:
        CompileError: TVM could not compile or link it.
    """
    drop_picks(work_dir)
    return compile_tuned(model, target, work_dir, cache, linker)


def tune_model(
    params: TuneParams, target: dict[str, Any], tracker: TrackerParams, cache: CompileCache,
    progress: TuneProgress | None = None, fleet: BestRecords | None = None,
    checkpoint: Checkpoint | None = None,
) -> ModelTuneResult:
    """Tune the model's tasks together until each has its trials or time is up; compile it.

    Reusing ``params.work_dir`` resumes: trials already measured count, only
    the missing ones are asked for, and no recorded trace is measured again.
    With ``fleet``, each task short of its trials first gets the fleet's best
    records of its workload (:mod:`farm.jobs.tune_seed`), which count as measured.

    Args:
        params: ``model``, trial budget (``trials``, ``trials_per_task``,
            ``max_tasks``), time budget ``for_s``, work folder, builder and
            timing settings.
        target: target dict the phones serving ``tracker.key`` share.
        tracker: tracker address and the key only this job's phones serve.
        cache: the compile cache the tuned model is built into.
        progress: the work folder's counters; opened here when None.
        fleet: the fleet's best records on this target and device model; None:
            start from the work folder alone.
        checkpoint: called after every measured batch with each task's name by
            its workload index, to keep the records measured so far elsewhere
            (the fleet's database: :class:`farm.kinds.tune_fleet.RecordCheckpoint`);
            None: they stay in the work folder alone.

    Returns:
        The tasks' trials, the throughput, and ``model_tuned.so``.

    Raises:
        SpecError: a CPU target without ``num-cores``, an invalid model or shapes,
            or a model with no tunable task.
        ToolMissing: the NDK is needed and missing.
        CompileError: the model cannot be imported or compiled, or no trial
            of it was measured.
    """
    model = _model_of(params)
    if target.get("kind") == "llvm" and not target.get("num-cores"):
        raise SpecError("device.num_cores", "tuning a CPU target needs the phone's core count")
    linker = linker_for(target)
    params.work_dir.mkdir(parents=True, exist_ok=True)
    repair_work_dir(params.work_dir)
    progress = progress or TuneProgress(params.work_dir)
    progress.add(attempts=1)
    progress.set_phase("extracting tasks")
    mod, inputs = _import(model)
    tasks = model_tasks(mod, target)[: params.max_tasks]
    plan, batch = plan_trials([t.flop * t.weight for t in tasks], params.trials,
                              params.trials_per_iter, params.trials_per_task)
    planned = []
    for t, n in zip(tasks, plan, strict=True):
        if n > 0:
            index, shash = _task_workload(t, params)
            planned.append(_Planned(t, index, n, shash))
    if not planned:
        raise SpecError("params.model", f"{model.shown_name} has no tunable task")
    seeded = 0 if fleet is None else _seed_from_fleet(planned, params, target, fleet)
    before = [min(m, p.trials) for m, p in zip(_measured(planned, params), planned, strict=True)]
    progress.set_tasks([TaskProgress(p.task.name, p.index, p.trials, b)
                        for p, b in zip(planned, before, strict=True)], budget_s=params.for_s)
    verdicts: list[Verdict] | None = [] if target.get("kind") == "llvm" else None
    stopped_by = _tune_all(planned, batch, params, tracker, linker, progress, checkpoint,
                           verdicts)
    counts = _measured(planned, params)
    if sum(counts) == 0:
        raise CompileError(model.model_path.name,
                           f"no trial measured ({stopped_by} ran out first)")
    results = [TaskResult(p.task.name, p.index, p.trials, m,
                          best_record_s(params.work_dir, p.index))
               for p, m in zip(planned, counts, strict=True)]
    progress.set_phase("compiling")
    library = compile_tuned(model, target, params.work_dir, cache, linker)
    failed = sum(count_trials(params.work_dir, p.index)[1] for p in planned)
    counters = progress.counters
    log.info("tuning_finished", tasks=len(planned), measured=sum(counts), failed=failed,
             stopped_by=stopped_by, trials_per_phone_hour=counters.trials_per_phone_hour)
    return ModelTuneResult(
        model_sha256=hashlib.sha256(model.model_path.read_bytes()).hexdigest(),
        inputs=inputs,
        tasks=results,
        trials_requested=sum(p.trials for p in planned),
        trials_measured_before=sum(before),
        trials_measured=sum(min(m, p.trials) for m, p in zip(counts, planned, strict=True)),
        trials_failed=failed,
        tuned_library=str(library),
        work_dir=str(params.work_dir),
        target=target,
        stopped_by=stopped_by,
        tuning_s=counters.tuning_s,
        first_trial_s=counters.first_trial_s,
        trials_per_phone_hour=counters.trials_per_phone_hour,
        limit_per_phone_hour=counters.limit_per_phone_hour,
        trials_from_fleet=seeded,
        picks_checked=None if verdicts is None else len(verdicts),
        picks_used=None if verdicts is None else sum(v.used for v in verdicts),
    )
