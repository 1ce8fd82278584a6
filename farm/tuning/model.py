"""MetaSchedule tuning of an ONNX model's tasks across every phone serving a tracker key.

:func:`tune_model` runs one attempt, in three parts, each a module of its own:

- :mod:`farm.tuning.tasks`: the model's tasks, extracted as the ``model``
  job compiles it, heaviest first, capped at ``max_tasks``, their trials
  planned and their workloads committed to the work folder's database;
- :mod:`farm.tuning.run`: the fleet's best records seeded, each task's
  default schedule measured, then one MetaSchedule run over all tasks in
  rounds until each has its trials or the time budget (``for_s``) is spent,
  and on CPU targets each task's pick measured again against its default;
- :mod:`farm.tuning.result`: the model compiled with the database applied
  (``<work_dir>/model_tuned.so``) and the result.

Reusing the work folder resumes: trials already measured count, only the
missing ones are asked for. The progress file (:mod:`farm.tuning.progress`)
names the phase and lists the tasks as soon as they are extracted.
"""

from __future__ import annotations

import hashlib
from typing import Any

import structlog

from farm.errors import CompileError, SpecError
from farm.jobs.cache import CompileCache
from farm.jobs.ndk import linker_for
from farm.jobs.params import TrackerParams, TuneParams
from farm.jobs.tuning_db import best_record_s, count_trials, repair_work_dir
from farm.tuning.counters import TaskProgress
from farm.tuning.progress import TuneProgress
from farm.tuning.result import (
    TUNED_LIBRARY,
    ModelTuneResult,
    TaskResult,
    compile_tuned,
    keep_untuned,
)
from farm.tuning.run import Checkpoint, measured, seed_from_fleet, tune_all
from farm.tuning.seed import BestRecords
from farm.tuning.tasks import ModelTask, Planned, import_model, model_of, model_tasks, plan_tasks
from farm.tuning.verify import Verdict

__all__ = ["TUNED_LIBRARY", "Checkpoint", "ModelTask", "ModelTuneResult", "compile_tuned",
           "keep_untuned",
           "model_tasks", "tune_model"]

log = structlog.get_logger(__name__)


def tune_model(
    params: TuneParams, target: dict[str, Any], tracker: TrackerParams, cache: CompileCache,
    progress: TuneProgress | None = None, fleet: BestRecords | None = None,
    checkpoint: Checkpoint | None = None,
) -> ModelTuneResult:
    """Tune the model's tasks together until each has its trials or time is up; compile it.

    Reusing ``params.work_dir`` resumes: trials already measured count, only
    the missing ones are asked for, and no recorded trace is measured again.
    With ``fleet``, each task short of its trials first gets the fleet's best
    records of its workload (:mod:`farm.tuning.seed`), which count as measured.

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
            (the fleet's database: :class:`farm.tuning.fleet_records.RecordCheckpoint`);
            None: they stay in the work folder alone.

    With a ``progress`` that shares the job's tasks with other attempts
    (:class:`farm.tuning.work_progress.TaskWorkProgress`), only the tasks this
    attempt holds are tuned, then those it takes over from an attempt that
    stopped; the build then starts from every attempt's records (``fleet``).
    A helper attempt (``progress.builds`` false) returns without a build.

    Returns:
        The tasks' trials, the throughput, and ``model_tuned.so`` (``""`` for a helper).

    Raises:
        SpecError: a CPU target without ``num-cores``, an invalid model or shapes,
            or a model with no tunable task.
        ToolMissing: the NDK is needed and missing.
        CompileError: the model cannot be imported or compiled, or no trial
            of it was measured.
    """
    model = model_of(params)
    if target.get("kind") == "llvm" and not target.get("num-cores"):
        raise SpecError("device.num_cores", "tuning a CPU target needs the phone's core count")
    linker = linker_for(target)
    params.work_dir.mkdir(parents=True, exist_ok=True)
    repair_work_dir(params.work_dir)
    progress = progress or TuneProgress(params.work_dir)
    progress.add(attempts=1)
    progress.set_phase("extracting tasks")
    mod, inputs = import_model(model)
    planned, batch, total = plan_tasks(mod, target, params)
    progress.set_model_tasks(total)
    if not planned:
        raise SpecError("params.model", f"{model.shown_name} has no tunable task")
    seeded = 0 if fleet is None else seed_from_fleet(planned, params, target, fleet)
    before = [min(m, p.trials) for m, p in zip(measured(planned, params), planned, strict=True)]
    progress.set_tasks([TaskProgress(p.task.name, p.index, p.trials, b)
                        for p, b in zip(planned, before, strict=True)], budget_s=params.for_s)
    # The picks checked on CPU targets; verify_rounds 0: not checked (farm.tuning.emulated).
    verdicts: list[Verdict] | None = ([] if target.get("kind") == "llvm" and params.verify_rounds
                                      else None)
    # The tasks this attempt holds; then those it takes over from another attempt (another
    # host's) of the job that stopped, until no other attempt tunes one.
    mine = progress.tasks_to_tune([p.task.name for p in planned])
    shared = len(mine) < len(planned)  # another attempt held a task at the start
    stopped_by = "trials"  # the other attempts tuned every task
    while True:
        if mine:
            stopped_by = tune_all([p for p in planned if p.task.name in mine], batch, params,
                                  tracker, linker, progress, checkpoint, verdicts)
        mine = progress.take_over()
        if not mine:
            break
        shared = True
        if fleet is not None:  # what the stopped attempt checkpointed is not measured again
            seeded += seed_from_fleet(planned, params, target, fleet)
    if not progress.builds:  # a helper attempt: its tasks' records are the fleet's already
        counts = measured(planned, params)
        log.info("tuning_helped", tasks=len(planned), measured=sum(counts), stopped_by=stopped_by)
        return _result(model, inputs, planned, params, target, progress, counts,
                       library="", stopped_by=stopped_by, seeded=seeded, before=0, verdicts=None,
                       model_tasks=total)
    if shared and fleet is not None:  # the build uses every host's records of the job's tasks
        seeded += seed_from_fleet(planned, params, target, fleet)
    counts = measured(planned, params)
    if sum(counts) == 0:
        raise CompileError(model.model_path.name,
                           f"no trial measured ({stopped_by} ran out first)")
    progress.enter_stage("build")
    progress.set_phase("compiling")
    library = compile_tuned(model, target, params.work_dir, cache, linker)
    result = _result(model, inputs, planned, params, target, progress, counts,
                     library=str(library), stopped_by=stopped_by, seeded=seeded,
                     before=sum(before), verdicts=verdicts, model_tasks=total)
    log.info("tuning_finished", tasks=len(planned), measured=sum(counts),
             failed=result.trials_failed, stopped_by=stopped_by,
             trials_per_phone_hour=result.trials_per_phone_hour)
    return result


def _result(model: Any, inputs: Any, planned: list[Planned], params: TuneParams,
            target: dict[str, Any], progress: TuneProgress, counts: list[int], *,
            library: str, stopped_by: str, seeded: int, before: int,
            verdicts: list[Verdict] | None, model_tasks: int) -> ModelTuneResult:
    """The tuning's result from its work folder's records (``library`` "" for a helper)."""
    counters = progress.counters
    return ModelTuneResult(
        model_sha256=hashlib.sha256(model.model_path.read_bytes()).hexdigest(),
        inputs=inputs,
        tasks=[TaskResult(p.task.name, p.index, p.trials, m,
                          best_record_s(params.work_dir, p.index))
               for p, m in zip(planned, counts, strict=True)],
        trials_requested=sum(p.trials for p in planned),
        trials_measured_before=before,
        trials_measured=sum(min(m, p.trials) for m, p in zip(counts, planned, strict=True)),
        trials_failed=sum(count_trials(params.work_dir, p.index)[1] for p in planned),
        tuned_library=library,
        work_dir=str(params.work_dir),
        target=target,
        stopped_by=stopped_by,
        tuning_s=counters.tuning_s,
        first_trial_s=counters.first_trial_s,
        trials_per_phone_hour=counters.trials_per_phone_hour,
        limit_per_phone_hour=counters.limit_per_phone_hour,
        trials_from_fleet=seeded,
        picks_checked=None if verdicts is None else sum(v.checked for v in verdicts),
        picks_used=None if verdicts is None else sum(v.used for v in verdicts),
        picks_unchecked=None if verdicts is None else sum(not v.checked for v in verdicts),
        model_tasks=model_tasks,
    )
