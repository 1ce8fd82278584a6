"""A tuning job's counters as its work folder keeps them: the file, its form, and reading it.

A job's attempts share one work folder (:func:`farm.jobs.tuning_db.tune_work_dir`)
and MetaSchedule's database in it; the counters live beside it::

    <work_dir>/farm_progress.json
        {"attempts": 2, "rounds": 3, "batches": 5, "app_relaunches": ["serial", ...],
         "tasks": [{"name": "fused_conv2d_add_relu", "workload_index": 0,
                    "trials_asked": 4, "trials_measured": 2, "best_s": 1.2e-05}, ...],
         "eta_s": 42.0, "phase": "tuning", "tuning_s": 310.0, "first_trial_s": 48.0,
         "trials_per_phone_hour": 410.0, "limit_per_phone_hour": 1900.0}

``tasks`` lists the tuning tasks in tuning order (a GEMM job has one task), each
with the trials asked and measured so far and the best measured candidate's
mean run time (``best_s``, null until one is measured). ``eta_s`` estimates the
seconds until the job's result (:mod:`farm.tuning.eta`): the search left
(the budget's end unless the search left, priced per task from its measured
searches and measurements, clearly ends first; null while that price is
unknown and the budget may not be what ends the run), the picks' check, the
tuned build and the timing of the untuned and tuned builds
(:mod:`farm.tuning.tail`), each stage priced again as it starts
(:meth:`TuneProgress.enter_stage`). ``phase``
says what the attempt does now (``extracting tasks``, ``tuning``,
``compiling``, ``timing the untuned and tuned builds``, and once the result is
made ``done: ...``), so a job is never a silent ``0/0 tasks``; ``model_tasks``
counts every task of the model, ``tasks`` listing those tuned;
``tuning_s`` is the tuning time spent over all attempts, each counted from
its start (opening its :class:`TuneProgress`: imports, task extraction and
the first builds count), which is what a time budget counts;
``first_trial_s`` is the seconds from this attempt's start to its
first measured trial; ``trials_per_phone_hour`` is this attempt's measured
trials per phone-hour and ``limit_per_phone_hour`` the most that its phones
could measure, were they never idle (:func:`farm.tuning.rate.limit_per_phone_hour`).

:class:`farm.tuning.progress.TuneProgress` writes the file; anything here reads it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from farm.clock import Clock, SystemClock

__all__ = ["PROGRESS_FILE", "TaskProgress", "TuneCounters", "read_counters"]

PROGRESS_FILE = "farm_progress.json"


@dataclass(frozen=True)
class TaskProgress:
    """One tuning task's trials.

    Attributes:
        name: MetaSchedule's task name, e.g. ``"fused_conv2d_add_relu"``.
        workload_index: its workload's line in ``database_workload.json``
            (-1 before it is known).
        trials_asked: measured trials wanted for the task.
        trials_measured: trials measured so far (failed measurements excluded).
        best_s: the best candidate's mean run time in seconds, None when none
            was measured yet.
    """

    name: str
    workload_index: int = -1
    trials_asked: int = 0
    trials_measured: int = 0
    best_s: float | None = None

    @classmethod
    def from_dict(cls, record: Any) -> TaskProgress | None:
        """A task from its JSON form; None when malformed."""
        if not isinstance(record, dict) or not isinstance(record.get("name"), str):
            return None
        index, asked, measured = (record.get(k) for k in (
            "workload_index", "trials_asked", "trials_measured"))
        if type(index) is not int or type(asked) is not int or type(measured) is not int:
            return None
        best = record.get("best_s")
        best_s = float(best) if isinstance(best, int | float) and best > 0 else None
        return cls(record["name"], index, max(asked, 0), max(measured, 0), best_s)


@dataclass(frozen=True)
class TuneCounters:
    """What a tuning job did so far, over all its attempts.

    Attributes:
        attempts: tuning runs started on the work folder (one per job attempt).
        rounds: MetaSchedule ``tune_tir`` runs; one round measures one or more batches.
        batches: measured batches (MetaSchedule iterations of up to
            ``trials_per_batch`` candidates each).
        app_relaunches: the serial of each phone farmd recovered (a recovery
            step that brought its server back) while it served the job's key.
        tasks: the tuning tasks, in tuning order (empty before tuning starts).
        eta_s: estimated seconds left, None while unknown.
        phase: what the attempt does now ("" before it starts).
        tuning_s: seconds spent tuning over all attempts.
        first_trial_s: seconds from this attempt's start to its first measured
            trial; None before it.
        trials_per_phone_hour: this attempt's measured trials per phone-hour.
        limit_per_phone_hour: measured trials per phone-hour were the phones
            never idle (run times plus uploads of the trials measured).
        model_tasks: every task of the model, ``tasks`` being those tuned (the
            heaviest, where the trials do not reach them all); None: not known.
    """

    attempts: int = 0
    rounds: int = 0
    batches: int = 0
    app_relaunches: tuple[str, ...] = ()
    tasks: tuple[TaskProgress, ...] = ()
    eta_s: float | None = None
    phase: str = ""
    tuning_s: float = 0.0
    first_trial_s: float | None = None
    trials_per_phone_hour: float | None = None
    limit_per_phone_hour: float | None = None
    model_tasks: int | None = None

    @property
    def trials_asked(self) -> int:
        """Trials asked over all tasks."""
        return sum(t.trials_asked for t in self.tasks)

    @property
    def trials_measured(self) -> int:
        """Trials measured over all tasks, at most the trials asked of each."""
        return sum(min(t.trials_measured, t.trials_asked) for t in self.tasks)

    @property
    def tasks_done(self) -> int:
        """Tasks whose asked trials are all measured."""
        return sum(t.trials_measured >= t.trials_asked for t in self.tasks)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``app_relaunches`` and ``tasks`` as lists."""
        record = asdict(self)
        record["app_relaunches"] = list(self.app_relaunches)
        record["tasks"] = [asdict(t) for t in self.tasks]
        return record

    @classmethod
    def from_dict(cls, record: Any) -> TuneCounters:
        """Counters from their JSON form; anything malformed counts as zero.

        Args:
            record: a parsed ``farm_progress.json``.
        """
        if not isinstance(record, dict):
            return cls()

        def count(name: str) -> int:
            value = record.get(name)
            return value if type(value) is int and value >= 0 else 0

        relaunches = record.get("app_relaunches")
        serials = tuple(s for s in relaunches if isinstance(s, str)) if isinstance(
            relaunches, list) else ()
        tasks = record.get("tasks")
        parsed = [TaskProgress.from_dict(t) for t in tasks] if isinstance(tasks, list) else []

        def seconds(name: str) -> float | None:
            value = record.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                return None
            return float(value)

        phase = record.get("phase")
        model_tasks = record.get("model_tasks")
        return cls(count("attempts"), count("rounds"), count("batches"), serials,
                   tuple(t for t in parsed if t is not None), seconds("eta_s"),
                   phase if isinstance(phase, str) else "", seconds("tuning_s") or 0.0,
                   seconds("first_trial_s"), seconds("trials_per_phone_hour"),
                   seconds("limit_per_phone_hour"),
                   model_tasks if type(model_tasks) is int and model_tasks >= 0 else None)


def read_counters(work_dir: Path, clock: Clock | None = None) -> TuneCounters | None:
    """The counters of a work folder for display; reads only, never creates anything.

    ``eta_s`` is as of the file's last write: the counters change at each
    measured batch, and a batch can take minutes (a large search on a loaded
    host), so the time since that write is taken off (never below 0 s): what
    ``farmctl job`` and the API show counts down between writes.

    Args:
        work_dir: the tuning work folder.
        clock: gives the time now (:meth:`farm.clock.Clock.now`), to age ``eta_s``.

    Returns:
        None when it has none (not a tuning job, or not started yet).
    """
    path = Path(work_dir) / PROGRESS_FILE
    try:
        counters = TuneCounters.from_dict(json.loads(path.read_text(encoding="utf-8")))
        written_s = path.stat().st_mtime
    except (OSError, ValueError):
        return None
    if counters.eta_s is None:
        return counters
    age_s = max(0.0, (clock or SystemClock()).now().timestamp() - written_s)
    return replace(counters, eta_s=max(0.0, counters.eta_s - age_s))
