"""MetaSchedule tuning of an ONNX model's tasks across every phone serving a tracker key.

The model goes ONNX -> Relax -> fused TIR functions exactly as the ``model``
job compiles it (:func:`farm.jobs.model.relax_module`,
:func:`farm.jobs.model.tunable_module`: the passes ``compile_relax`` runs before
it applies a database), so the tasks extracted here are the workloads the
tuned build looks up. Tasks are ranked heaviest first (FLOPs times the
times they occur) and capped at ``max_tasks``.

Each task is tuned on its own, in order, into the one work folder database
(:mod:`farm.jobs.tune` describes the folder and the builder and runner set-up,
shared with the GEMM tuning). Resuming is per task: a task's records are found
by its workload's line in ``database_workload.json``, its measured trials are
counted there, and MetaSchedule is asked only for the missing ones, in rounds
(:func:`farm.jobs.tune.tune_in_rounds`) that make up for failed measurements.
A task already complete costs nothing on resume.

At the end the model is compiled with the database applied, by the ``model``
job's own build (:func:`farm.jobs.model.build_model` with ``database_dir``,
linked for the phones, NDK for real ones), and copied to
``<work_dir>/model_tuned.so``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from farm.errors import CompileError, SpecError
from farm.jobs.cache import CompileCache
from farm.jobs.model import ModelInput, build_model, load_model, relax_module, tunable_module
from farm.jobs.ndk import Linker, linker_for
from farm.jobs.params import ModelParams, TrackerParams, TuneParams
from farm.jobs.tune import builder_and_runner, cost_model, measure_callbacks, tune_in_rounds
from farm.jobs.tune_progress import TaskProgress, TuneProgress
from farm.jobs.tune_records import best_record_s, count_trials, repair_work_dir, workload_index

__all__ = ["TUNED_LIBRARY", "ModelTask", "ModelTuneResult", "compile_tuned", "model_tasks",
           "plan_trials", "tune_model"]

log = structlog.get_logger(__name__)

#: The tuned model's library in the work folder (``farmctl export`` copies it).
TUNED_LIBRARY = "model_tuned.so"


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


def plan_trials(tasks: int, trials: int, trials_per_task: int | None) -> list[int]:
    """Measured trials asked of each of ``tasks`` tasks, heaviest first.

    ``trials`` is shared evenly (the heaviest get the remainder), each share
    capped at ``trials_per_task``; a task left with 0 trials is not tuned.

    >>> plan_trials(3, 8, None)
    [3, 3, 2]
    >>> plan_trials(3, 100, 4)
    [4, 4, 4]
    >>> plan_trials(3, 2, None)
    [1, 1]
    """
    if tasks <= 0:
        return []
    base, extra = divmod(trials, tasks)
    shares = [base + (i < extra) for i in range(tasks)]
    if trials_per_task is not None:
        shares = [min(s, trials_per_task) for s in shares]
    return [s for s in shares if s > 0]


def _drop_unnamed_ms_handlers() -> None:
    """Remove handlers without a name from MetaSchedule's logger.

    TVM's ``create_loggers`` (tvm/s_tir/meta_schedule/logging.py) lists that
    logger's handlers by name in a ``dictConfig`` and fails (``None.format``)
    on one without a name. One is left behind after a ``tune_tir`` has run
    in the same process (seen running the GEMM tuning, then a model tuning,
    in one test process); an attempt child tunes once, so only a process
    that tunes twice meets it.
    """
    import logging

    ms_logger = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in list(ms_logger.handlers):
        if handler.get_name() is None:
            ms_logger.removeHandler(handler)


def _tune_context(task: ModelTask, params: TuneParams) -> tuple[Any, float]:
    from tvm.s_tir.meta_schedule.relax_integration import extracted_tasks_to_tune_contexts

    _drop_unnamed_ms_handlers()
    contexts, weights = extracted_tasks_to_tune_contexts(
        [task.extracted], str(params.work_dir), seed=params.seed)
    return contexts[0], weights[0]


def _task_index(task: ModelTask, params: TuneParams) -> int:
    """Commit the task's workload to the database (if new) and return its line."""
    from tvm.s_tir import meta_schedule as ms

    context, _ = _tune_context(task, params)
    database = ms.database.JSONDatabase(work_dir=str(params.work_dir))
    shash = str(database.commit_workload(context.mod).as_json()[0])
    index = workload_index(params.work_dir, shash)
    if index is None:  # commit_workload writes the line before it returns
        raise CompileError(task.name, "its workload is missing from the tuning database")
    return index


@dataclass
class _Measurers:
    """MetaSchedule's builder and runner, started at the first round and kept for every task.

    A ``LocalBuilder`` starts its workers when created, each running
    :func:`farm.jobs.tune.builder_initializer` (minutes on a loaded 2-core host),
    so one pair serves all rounds of all tasks; a run with nothing left to
    measure starts none.
    """

    params: TuneParams
    tracker: TrackerParams
    linker: Linker
    pair: tuple[Any, Any] | None = None

    def get(self) -> tuple[Any, Any]:
        """``(builder, runner)``, created on the first call."""
        if self.pair is None:
            self.pair = builder_and_runner(self.params, self.tracker, self.linker)
        return self.pair


def _tune_task_round(
    task: ModelTask, params: TuneParams, measurers: _Measurers, trials: int,
    progress: TuneProgress, on_batch: Callable[[], None],
) -> None:
    from tvm.s_tir import meta_schedule as ms

    builder, runner = measurers.get()
    context, weight = _tune_context(task, params)
    ms.tune_tasks(
        tasks=[context], task_weights=[weight], work_dir=str(params.work_dir),
        max_trials_global=trials, max_trials_per_task=trials,
        num_trials_per_iter=min(params.trials_per_iter, trials),
        builder=builder, runner=runner, cost_model=cost_model(),
        measure_callbacks=measure_callbacks(progress, on_batch),
    )


def _tune_task(
    task: ModelTask, index: int, trials: int, params: TuneParams, measurers: _Measurers,
    progress: TuneProgress,
) -> None:
    """Tune one task until ``trials`` of its trials are measured (resuming its records)."""

    def measured() -> int:
        return count_trials(params.work_dir, index)[0]

    def on_batch() -> None:
        progress.update_task(task.name, measured(), best_record_s(params.work_dir, index))

    def tune_round(remaining: int) -> None:
        _tune_task_round(task, params, measurers, remaining, progress, on_batch)

    log.info("tuning_task", task=task.name, trials=trials, measured=measured())
    tune_in_rounds(params, trials, measured, tune_round, progress)
    on_batch()
    if measured() == 0:
        raise CompileError(task.name, f"no trial measured in {params.max_rounds} rounds")


def compile_tuned(
    model: ModelParams, target: dict[str, Any], work_dir: Path, cache: CompileCache,
    linker: Linker,
) -> Path:
    """The model compiled with the work folder's database applied, as ``model_tuned.so``.

    Built as the ``model`` job builds it (:func:`farm.jobs.model.build_model` with
    ``database_dir``: same linker, same compile cache entry), then copied into
    the work folder. Tasks without a record keep TVM's default schedules.

    Raises:
        CompileError: TVM could not compile or link it.
    """
    library, _ = build_model(replace(model, database_dir=work_dir), target, cache, linker)
    out = work_dir / TUNED_LIBRARY
    tmp = out.with_suffix(".tmp.so")
    shutil.copyfile(library, tmp)
    os.replace(tmp, out)
    return out


def tune_model(
    params: TuneParams, target: dict[str, Any], tracker: TrackerParams, cache: CompileCache,
    progress: TuneProgress | None = None,
) -> ModelTuneResult:
    """Tune the model's heaviest tasks until each has its trials; compile it with the records.

    Reusing ``params.work_dir`` resumes task by task: trials already measured
    count, only the missing ones are asked for.

    Args:
        params: ``model``, trial budget (``trials``, ``trials_per_task``,
            ``max_tasks``), work folder, builder and timing settings.
        target: target dict the phones serving ``tracker.key`` share.
        tracker: tracker address and the key only this job's phones serve.
        cache: the compile cache the tuned model is built into.
        progress: the work folder's counters; opened here when None.

    Returns:
        The tasks' trials and ``model_tuned.so``.

    Raises:
        SpecError: a CPU target without ``num-cores``, an invalid model or shapes,
            or a model with no tunable task.
        ToolMissing: the NDK is needed and missing.
        CompileError: the model cannot be imported or compiled, or a task got
            no measured trial in ``max_rounds`` rounds.
    """
    model = _model_of(params)
    if target.get("kind") == "llvm" and not target.get("num-cores"):
        raise SpecError("device.num_cores", "tuning a CPU target needs the phone's core count")
    linker = linker_for(target)
    mod, inputs = _import(model)
    tasks = model_tasks(mod, target)[: params.max_tasks]
    asked = plan_trials(len(tasks), params.trials, params.trials_per_task)
    if not asked:
        raise SpecError("params.model", f"{model.shown_name} has no tunable task")
    tasks = tasks[: len(asked)]
    params.work_dir.mkdir(parents=True, exist_ok=True)
    repair_work_dir(params.work_dir)
    progress = progress or TuneProgress(params.work_dir)
    progress.add(attempts=1)
    indexes = [_task_index(task, params) for task in tasks]
    before = [min(count_trials(params.work_dir, i)[0], n) for i, n in zip(indexes, asked,
                                                                          strict=True)]
    progress.set_tasks([TaskProgress(t.name, i, n, b)
                        for t, i, n, b in zip(tasks, indexes, asked, before, strict=True)])
    measurers = _Measurers(params, tracker, linker)
    for task, index, trials in zip(tasks, indexes, asked, strict=True):
        _tune_task(task, index, trials, params, measurers, progress)
    results = [TaskResult(t.name, i, n, count_trials(params.work_dir, i)[0],
                          best_record_s(params.work_dir, i))
               for t, i, n in zip(tasks, indexes, asked, strict=True)]
    library = compile_tuned(model, target, params.work_dir, cache, linker)
    failed = sum(count_trials(params.work_dir, i)[1] for i in indexes)
    log.info("tuning_finished", tasks=len(tasks), measured=sum(r.trials_measured for r in results),
             failed=failed)
    return ModelTuneResult(
        model_sha256=hashlib.sha256(model.model_path.read_bytes()).hexdigest(),
        inputs=inputs,
        tasks=results,
        trials_requested=sum(asked),
        trials_measured_before=sum(before),
        trials_measured=sum(r.trials_measured for r in results),
        trials_failed=failed,
        tuned_library=str(library),
        work_dir=str(params.work_dir),
        target=target,
    )
