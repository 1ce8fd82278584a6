"""A model tune job's task rows as the engine sees them: their values and the store it asks.

The rows live in the queue's database (``tune_task_work``, ``tune_builds``:
:mod:`farm.queue.task_work` writes and claims them); the engine's shared
progress (:class:`farm.tuning.task_work.TaskWorkProgress`) reaches them only
through :class:`TaskRows`, which the queue's ``Store`` provides, so the tuning
engine never imports the queue (docs/architecture.md, "The tuning engine").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Protocol

__all__ = ["DONE", "QUEUED", "TUNING", "BuildClaim", "TaskRows", "TaskWork"]

#: A task row's states.
QUEUED, TUNING, DONE = "queued", "tuning", "done"


@dataclass(frozen=True)
class TaskWork:
    """One task of a model tune job, as its row holds it.

    Attributes:
        shash: its workload's structural hash.
        task: MetaSchedule's task name.
        trials: measured trials asked.
        position: its place in tuning order (heaviest first).
        trials_measured: trials measured so far (failed ones excluded).
        best_s: the best measured candidate's mean run time in seconds; None before one.
        state: ``"queued"``, ``"tuning"`` or ``"done"``.
        attempt_id: the attempt that claimed it last; None before one did.
        host: that attempt's host.
    """

    shash: str
    task: str
    trials: int
    position: int = 0
    trials_measured: int = 0
    best_s: float | None = None
    state: str = QUEUED
    attempt_id: int | None = None
    host: str | None = None


class BuildClaim(str, Enum):
    """What :meth:`TaskRows.claim_tune_build` answers."""

    BUILD = "build"  # the caller holds the build: make it
    HELD = "held"  # a running attempt holds it
    BUILT = "built"  # made already
    TASKS_LEFT = "tasks left"  # a task row is not done yet


class TaskRows(Protocol):
    """The task rows' operations the engine uses (:class:`farm.queue.task_work.TaskWorkOps`).

    Each raises :class:`~farm.errors.StoreError` when the database refuses;
    their rules are the queue's (:mod:`farm.queue.task_work`).
    """

    def add_task_work(self, job_id: int, tasks: Sequence[TaskWork], now: datetime) -> int:
        """Write a row per task not written yet; returns the rows written."""
        ...

    def claim_task_work(self, job_id: int, attempt_id: int, host: str | None, now: datetime,
                        limit: int | None = None) -> list[TaskWork]:
        """Claim the job's claimable rows (at most ``limit``) for ``attempt_id``."""
        ...

    def report_task_work(self, job_id: int, attempt_id: int, shash: str, trials_measured: int,
                         best_s: float | None, now: datetime) -> bool:
        """Record a held task's trials; False when ``attempt_id`` lost the row."""
        ...

    def busy_task_work(self, job_id: int, attempt_id: int, now: datetime) -> list[TaskWork]:
        """The job's rows another live attempt tunes now."""
        ...

    def close_task_work(self, job_id: int, attempt_id: int, now: datetime) -> int:
        """Mark the rows ``attempt_id`` holds done; returns how many."""
        ...

    def task_work(self, job_id: int) -> list[TaskWork]:
        """The job's rows in tuning order."""
        ...

    def claim_tune_build(self, job_id: int, attempt_id: int, host: str | None,
                         now: datetime) -> BuildClaim:
        """Claim the job's one tuned build once every row is done."""
        ...

    def finish_tune_build(self, job_id: int, attempt_id: int, now: datetime) -> bool:
        """Mark the job's build made; False when ``attempt_id`` does not hold it."""
        ...
