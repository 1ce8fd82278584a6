"""A model tuning's result and its tuned build.

At the end the model is compiled with the database applied, by the ``model``
job's own build (:func:`farm.jobs.model.build_model` with ``database_dir``,
linked for the phones, NDK for real ones), and copied to
``<work_dir>/model_tuned.so``. Before that, on CPU targets, each task whose
best record is a searched candidate has it measured again against its
default schedule, interleaved, and the record is applied only where it is
faster by more than the measurements' spread (:mod:`farm.tuning.verify`):
the least of a few noisy measurements is often a candidate that was measured
fast once.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from farm.jobs.cache import CompileCache
from farm.jobs.model import ModelInput, build_model
from farm.jobs.ndk import Linker
from farm.jobs.params import ModelParams
from farm.jobs.tuning_db import TUNED_LIBRARY
from farm.tuning.verify import drop_picks

__all__ = ["TUNED_LIBRARY", "ModelTuneResult", "TaskResult", "compile_tuned", "keep_untuned"]


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
            (:func:`farm.tuning.rate.limit_per_phone_hour`).
        trials_from_fleet: records this attempt seeded from the fleet's
            (counted in ``trials_measured_before``).
        picks_checked: tasks whose best record (not their default schedule)
            was measured again against the default (:mod:`farm.tuning.verify`);
            None: not checked (GPU targets).
        picks_used: of those, the records faster by more than the spread,
            which the tuned build applies; the other tasks keep the default.
        picks_unchecked: tasks whose best record was not checked because the
            time budget was spent (they keep their default schedule; a resumed
            job checks them); None: not checked (GPU targets).
        model_tasks: every task of the model; ``tasks`` are those tuned (the
            heaviest, where the trials do not reach them all).
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
    picks_unchecked: int | None = None
    model_tasks: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (an unmeasured task's ``best_s`` is None)."""
        record = asdict(self)
        for task in record["tasks"]:
            if task["best_s"] == float("inf"):
                task["best_s"] = None
        return record


def compile_tuned(
    model: ModelParams, target: dict[str, Any], work_dir: Path, cache: CompileCache,
    linker: Linker,
) -> Path:
    """The model compiled with the work folder's database applied, as ``model_tuned.so``.

    Built as the ``model`` job builds it (:func:`farm.jobs.model.build_model` with
    ``database_dir``: same linker, same compile cache entry), then copied into
    the work folder. On CPU targets a task gets its best record only where
    that record beat the default schedule when measured again
    (:mod:`farm.tuning.verify`, ``<work_dir>/picked``); every other task
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
    the untuned one (:func:`farm.tuning.verify.drop_picks`).

    Returns:
        ``<work_dir>/model_tuned.so``, now the untuned build.

    Raises:
        CompileError: TVM could not compile or link it.
    """
    drop_picks(work_dir)
    return compile_tuned(model, target, work_dir, cache, linker)
