"""Each task's default schedule measured as one of its trials: a tuned build never loses to untuned.

The tuned build applies, per task, the best record of the work folder's
database (``MetaScheduleApplyDatabase``, :func:`farm.jobs.cpu_schedules.build.
scheduled_module`) and the default schedule to the tasks without one (farm's
on a CPU, dlight's on a GPU: :mod:`farm.jobs.gpu_schedules`).
With few trials, a task's best record can be slower than that default, and
the tuned model slower than the untuned one. So before MetaSchedule searches,
each task's default schedule (:func:`baseline_candidate`)
is built and measured on the job's phones like any candidate, and recorded in
the database as one of the task's trials (its trace replays that schedule).
The database's best record of a task is then the default schedule itself
unless a searched candidate measured faster on the same phones: the tuned
build uses a tuning record only where it beat the default.

The baselines also give the job its first measured trials within seconds of
the builder being ready: MetaSchedule's task scheduler records nothing until
every task has had its first batch searched and built (``TaskSchedulerNode::
Tune`` joins the runs after the round robin; apache/tvm ``src/s_tir/
meta_schedule/task_scheduler/task_scheduler.cc``), minutes for a model of 45
tasks (on the H200 host resnet18's 19 GPU tasks were searched 10 s each
before its first trial was recorded, 216 s into the attempt). They are built
and measured as MetaSchedule's ``SendToBuilder``,
``SendToRunner`` and ``AddToDatabase`` do (same builder and runner, the
target's runtime device and the failed-run cost, 1e10 s), a chunk
of ``chunk`` candidates measured while the next one builds.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from farm.jobs.targets import runtime_device_name
from farm.jobs.tuning_db import open_database
from farm.tuning.rate import cut_by_budget
from farm.tuning.search import measured_traces, trace_key

__all__ = ["BaselineTask", "baseline_candidate", "measure_baselines", "missing_baselines"]

log = structlog.get_logger(__name__)

#: MetaSchedule's run time of a failed measurement (``AddToDatabase``).
_FAILED_RUN_S = 1e10


@dataclass(frozen=True)
class BaselineTask:
    """One task whose default schedule is to be measured.

    Attributes:
        name: the task name.
        index: its workload's line in ``database_workload.json``.
        workload: the module MetaSchedule tunes (``ExtractedTask.dispatched[0]``).
        target: the task's ``tvm.target.Target``.
    """

    name: str
    index: int
    workload: Any
    target: Any


def baseline_candidate(workload: Any, target: Any) -> Any:
    """The task's default schedule as a MetaSchedule ``MeasureCandidate``.

    farm's default CPU schedule for an ``llvm`` target
    (:func:`farm.jobs.cpu_schedules.default_schedule`), dlight's default GPU
    schedule for any other (:func:`farm.jobs.gpu_schedules.default_schedule`):
    what the untuned build runs.

    Args:
        workload: the task's module (one PrimFunc, ``main``).
        target: the task's ``tvm.target.Target``.
    """
    from tvm.s_tir import meta_schedule as ms

    if str(target.kind.name) == "llvm":
        from farm.jobs.cpu_schedules import default_schedule
    else:
        from farm.jobs.gpu_schedules import default_schedule

    sch = default_schedule(workload["main"], target)
    # As EvolutionarySearch gives its candidates their arguments.
    args_info = ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True)
    return ms.MeasureCandidate(sch, args_info)


def missing_baselines(tasks: list[BaselineTask], work_dir: Path) -> list[BaselineTask]:
    """The tasks whose default schedule has no measured record in ``work_dir`` yet."""
    recorded = measured_traces(work_dir)
    return [t for t in tasks if _key(baseline_candidate(t.workload, t.target))
            not in recorded.get(t.index, set())]


def _key(candidate: Any) -> str:
    return trace_key(candidate.sch.trace.as_json(remove_postproc=False))


@dataclass
class _Chunk:
    """Candidates built together and sent to the runner."""

    tasks: list[BaselineTask]
    candidates: list[Any]
    builds: list[Any]
    futures: list[Any | None]  # None where the build failed


def _send(tasks: list[BaselineTask], builder: Any, runner: Any) -> _Chunk:
    from tvm.s_tir import meta_schedule as ms

    candidates = [baseline_candidate(t.workload, t.target) for t in tasks]
    builds = builder.build([ms.builder.BuilderInput(c.sch.mod, t.target)
                            for c, t in zip(candidates, tasks, strict=True)])
    inputs = [ms.runner.RunnerInput(b.artifact_path,
                                    runtime_device_name({"kind": str(t.target.kind.name)}),
                                    c.args_info)
              for b, c, t in zip(builds, candidates, tasks, strict=True) if b.error_msg is None]
    sent = iter(runner.run(inputs) if inputs else [])
    futures = [next(sent) if b.error_msg is None else None for b in builds]
    return _Chunk(tasks, candidates, builds, futures)


def _record(chunk: _Chunk, database: Any) -> int:
    """Commit the chunk's results as ``AddToDatabase`` does; returns the measured ones.

    A default schedule the time budget cut (:func:`farm.tuning.rate.cut_by_budget`)
    is not recorded.
    """
    from tvm.s_tir import meta_schedule as ms

    measured = 0
    for task, candidate, build, future in zip(chunk.tasks, chunk.candidates, chunk.builds,
                                              chunk.futures, strict=True):
        result = future.result() if future is not None else None
        error = build.error_msg if result is None else result.error_msg
        if cut_by_budget(error):  # not measured: a resumed job measures it
            if build.artifact_path is not None:
                shutil.rmtree(os.path.dirname(build.artifact_path), ignore_errors=True)
            continue
        run_secs = [_FAILED_RUN_S]
        if result is not None and error is None:
            run_secs = [float(s) for s in result.run_secs]
        database.commit_tuning_record(ms.database.TuningRecord(
            candidate.sch.trace, database.commit_workload(task.workload), run_secs,
            task.target, candidate.args_info))
        if build.artifact_path is not None:  # as MetaSchedule's RemoveBuildArtifact
            shutil.rmtree(os.path.dirname(build.artifact_path), ignore_errors=True)
        if error is None:
            measured += 1
        else:
            log.warning("tuning_baseline_failed", task=task.name, error=str(error)[-1500:])
    return measured


def measure_baselines(tasks: list[BaselineTask], builder: Any, runner: Any, work_dir: Path,
                      chunk: int, expired: Callable[[], bool],
                      on_recorded: Callable[[], None]) -> int:
    """Build, measure and record the default schedule of each task, ``chunk`` at a time.

    Chunk k is measured while chunk k+1 builds; its records are committed (and
    ``on_recorded`` called) as soon as it is measured. No chunk is sent once
    ``expired()``; the chunks already sent are still recorded.

    Args:
        tasks: the tasks to measure (see :func:`missing_baselines`).
        builder: MetaSchedule builder (the tuning run's).
        runner: MetaSchedule runner (the tuning run's, the job's phones).
        work_dir: the work folder's ``JSONDatabase``.
        chunk: candidates per build call (the builder's processes).
        expired: True once the time budget is spent.
        on_recorded: called after each chunk's records are written.

    Returns:
        The baselines measured (failed measurements are recorded, not counted).
    """
    database = open_database(work_dir)
    measured = 0
    in_flight: list[_Chunk] = []
    size = max(1, chunk)
    for start in range(0, len(tasks), size):
        if expired():
            break
        in_flight.append(_send(tasks[start:start + size], builder, runner))
        while len(in_flight) > 1:
            measured += _record(in_flight.pop(0), database)
            on_recorded()
    for sent in in_flight:
        measured += _record(sent, database)
        on_recorded()
    log.info("tuning_baselines_measured", tasks=len(tasks), measured=measured)
    return measured
