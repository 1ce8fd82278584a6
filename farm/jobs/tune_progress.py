"""A tuning job's counters, kept in its work folder so they add up across attempts.

A job's attempts share one work folder (:func:`farm.runner.execute.tune_work_dir`)
and MetaSchedule's database in it; the counters live beside it::

    <work_dir>/farm_progress.json
        {"attempts": 2, "rounds": 3, "batches": 5, "app_relaunches": ["serial", ...],
         "tasks": [{"name": "fused_conv2d_add_relu", "workload_index": 0,
                    "trials_asked": 4, "trials_measured": 2, "best_s": 1.2e-05}, ...],
         "eta_s": 42.0}

``tasks`` lists the tuning tasks in tuning order (a GEMM job has one task), each
with the trials asked and measured so far and the best measured candidate's
mean run time (``best_s``, null until one is measured). ``eta_s`` estimates the
seconds left from this attempt's rate: trials measured per second since it
started, applied to the trials still asked (null before a first measured trial).

Each change is written at once (``farm.privacy.write_private``: atomic, 0600), so a
farmd or child killed with -9 loses at most the change it was making; the file
is private (0600) like the rest of the data folder. The monitor thread of
:mod:`farm.runner.tune_phones` and the tuning thread both update it, so every
update holds one lock.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from farm.clock import Clock, SystemClock
from farm.privacy import write_private

__all__ = ["PROGRESS_FILE", "TaskProgress", "TuneCounters", "TuneProgress", "read_counters"]

log = structlog.get_logger(__name__)

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
        app_relaunches: the serial of each phone relaunched after its app crashed,
            in order.
        tasks: the tuning tasks, in tuning order (empty before tuning starts).
        eta_s: estimated seconds left, None while unknown.
    """

    attempts: int = 0
    rounds: int = 0
    batches: int = 0
    app_relaunches: tuple[str, ...] = ()
    tasks: tuple[TaskProgress, ...] = ()
    eta_s: float | None = None

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
        eta = record.get("eta_s")
        eta_s = float(eta) if isinstance(eta, int | float) and eta >= 0 else None
        return cls(count("attempts"), count("rounds"), count("batches"), serials,
                   tuple(t for t in parsed if t is not None), eta_s)


def read_counters(work_dir: Path) -> TuneCounters | None:
    """The counters of a work folder for display; reads only, never creates anything.

    Returns:
        None when it has none (not a tuning job, or not started yet).
    """
    path = Path(work_dir) / PROGRESS_FILE
    try:
        return TuneCounters.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


class TuneProgress:
    """The counters of one work folder, persisted on every change (thread-safe).

    Args:
        work_dir: the tuning work folder (created if missing).
        clock: measures this attempt's rate of measured trials for ``eta_s``.
    """

    def __init__(self, work_dir: Path, clock: Clock | None = None) -> None:
        self.path = Path(work_dir) / PROGRESS_FILE
        self._lock = threading.Lock()
        self._clock = clock or SystemClock()
        self._counters = self._load()
        # The rate is this attempt's: trials measured since (start_s, measured).
        self._rate_from: tuple[float, int] | None = None

    @property
    def counters(self) -> TuneCounters:
        """The counters now."""
        with self._lock:
            return self._counters

    def add(self, *, attempts: int = 0, rounds: int = 0, batches: int = 0) -> TuneCounters:
        """Add to the counters and persist them; return the new counters."""
        with self._lock:
            c = self._counters
            return self._store(replace(c, attempts=c.attempts + attempts, rounds=c.rounds + rounds,
                                       batches=c.batches + batches))

    def add_relaunch(self, serial: str) -> None:
        """Record that ``serial``'s app was relaunched."""
        with self._lock:
            c = self._counters
            self._store(replace(c, app_relaunches=(*c.app_relaunches, serial)))

    def set_tasks(self, tasks: list[TaskProgress]) -> None:
        """Start this attempt's tuning of ``tasks``: replace the task list, restart the rate."""
        with self._lock:
            self._rate_from = (self._clock.monotonic(), sum(
                min(t.trials_measured, t.trials_asked) for t in tasks))
            self._store(replace(self._counters, tasks=tuple(tasks), eta_s=None))

    def update_task(self, name: str, trials_measured: int, best_s: float) -> None:
        """Record a task's measured trials and best run time (inf: none), and the new ETA."""
        with self._lock:
            c = self._counters
            tasks = tuple(
                replace(t, trials_measured=trials_measured,
                        best_s=best_s if 0 < best_s < float("inf") else None)
                if t.name == name else t for t in c.tasks)
            updated = replace(c, tasks=tasks)
            self._store(replace(updated, eta_s=self._eta_s(updated)))

    def _eta_s(self, counters: TuneCounters) -> float | None:
        if self._rate_from is None:
            return None
        start_s, start_measured = self._rate_from
        done = counters.trials_measured - start_measured
        elapsed_s = self._clock.monotonic() - start_s
        if done <= 0 or elapsed_s <= 0:
            return None
        return (counters.trials_asked - counters.trials_measured) * elapsed_s / done

    def _store(self, counters: TuneCounters) -> TuneCounters:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_private(self.path, json.dumps(counters.to_dict()))
        self._counters = counters
        return counters

    def _load(self) -> TuneCounters:
        try:
            return TuneCounters.from_dict(json.loads(self.path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return TuneCounters()
        except (OSError, ValueError) as exc:
            # A torn or foreign file must not fail the job: the trials themselves
            # are in MetaSchedule's database, only these counters restart.
            log.warning("tuning_progress_unreadable", path=str(self.path), reason=str(exc))
            return TuneCounters()
