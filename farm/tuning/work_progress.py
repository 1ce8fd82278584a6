"""A model tune attempt's task work in the database: its tasks' rows, their progress, its build.

:class:`TaskWorkProgress` is the attempt's :class:`farm.tuning.progress.TuneProgress`
(``tune_model`` knows nothing of the queue) that also keeps the job's task
rows, through the store's :class:`farm.tuning.task_rows.TaskRows` (the rows are
:mod:`farm.queue.task_work`'s; the tune kind hands the store in,
:func:`farm.kinds.tune_model.attempt_progress`):

* when ``tune_model`` lists the tasks (``set_tasks``) it writes a row per
  task workload, once per job, and claims the rows no live attempt holds;
  the trials found measured (resumed, or seeded from the fleet's records)
  are reported at once;
* after every measured batch (``update_task``) each task's trials and best
  run time go to its row, so the API, the dashboard and ``farmctl job`` read
  them on any host (:func:`job_progress`);
* ``tune_model`` tunes only the tasks whose rows the attempt holds
  (``tasks_to_tune``): the job's main attempt claims about half of them when
  another host may start a helper attempt (:mod:`farm.queue.helpers`), which
  claims the rest; done with its own, the main attempt leaves the rows no
  attempt claimed yet to a helper for ``jobs.tune_helper_wait_s`` from its
  own claim, then waits for the other attempts' rows and takes over one whose
  holder stopped, or that no helper came for (``take_over``);
* when ``tune_model`` starts its build (its ``"compiling"`` phase) the rows
  it still holds are closed (a time budget that ran out stops them too) and
  the job's one build is claimed: an attempt that cannot hold it raises
  :class:`BuildHeld` rather than build a second library.

A store that refuses a progress write is logged, not raised: the tuning goes
on (the work folder and the fleet's records hold what it measured). The build
claim is never skipped: a refused claim raises.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from farm.clock import Clock, wait_until
from farm.errors import InfraFault, StoreError
from farm.jobs.tuning_db import workload_hashes
from farm.tuning.counters import TaskProgress, TuneCounters, read_counters
from farm.tuning.progress import TuneProgress

if TYPE_CHECKING:
    from farm.tuning.task_rows import TaskRows, TaskWork

__all__ = ["BUILD_PHASE", "BuildHeld", "TaskWorkProgress", "build_made", "job_progress",
           "tasks_from_rows"]

log = structlog.get_logger(__name__)

#: The phase ``tune_model`` names as it starts its tuned build
#: (:func:`farm.tuning.model.tune_model`).
BUILD_PHASE = "compiling"


class BuildHeld(InfraFault):
    """Another live attempt of the job holds its tuned build, or tunes a task still."""


def tasks_from_rows(rows: Sequence[TaskWork], local: Sequence[TaskProgress]) -> tuple[
        TaskProgress, ...]:
    """A job's task progress from its task rows (any host's), in tuning order.

    Args:
        rows: the job's rows (:meth:`farm.queue.store.Store.task_work`).
        local: this host's work folder's tasks, for their workload lines
            (-1 for a task this host never tuned).
    """
    index = {t.name: t.workload_index for t in local}
    return tuple(TaskProgress(r.task, index.get(r.task, -1), r.trials, r.trials_measured,
                              r.best_s) for r in rows)


class TaskWorkProgress(TuneProgress):
    """The work folder's counters, and the job's task rows in the database.

    Args:
        work_dir: the tuning work folder.
        store: the job's task rows (the queue's ``Store``).
        job_id: the tune job.
        attempt_id: this attempt (it claims the rows and the build).
        host: this farmd's host id.
        clock: as :class:`farm.tuning.progress.TuneProgress`'s; also stamps the rows.
        helper: a helper attempt (:mod:`farm.queue.helpers`): it claims every free
            row, tunes them, takes over none it must wait for, and never builds.
        share: the job's main attempt claims only about half its tasks (the
            heaviest first), leaving the rest to a helper on another host that has
            idle phones of the model; False: it claims all.
        poll_s: how often :meth:`take_over` reads the rows (None: ``jobs.tune_task_poll_s``).
        wait_s: how long :meth:`take_over` waits at most with no time budget
            (None: ``jobs.tune_lease_s``).
        helper_wait_s: how long a sharing main attempt leaves unclaimed rows to a
            helper, from its claim (None: ``jobs.tune_helper_wait_s``).
    """

    def __init__(self, work_dir: Path, store: TaskRows, job_id: int, attempt_id: int,
                 host: str | None, clock: Clock | None = None, *, helper: bool = False,
                 share: bool = False, poll_s: float | None = None,
                 wait_s: float | None = None, helper_wait_s: float | None = None) -> None:
        from farm.config import JobSettings

        super().__init__(work_dir, clock)
        self.store, self.job_id, self.attempt_id, self.host = store, job_id, attempt_id, host
        self.helper, self.share = helper, share
        defaults = JobSettings()
        self.poll_s = defaults.tune_task_poll_s if poll_s is None else poll_s
        self.wait_s = defaults.tune_lease_s if wait_s is None else wait_s
        self.helper_wait_s = (defaults.tune_helper_wait_s if helper_wait_s is None
                              else helper_wait_s)
        self._claimed_at_s: float | None = None  # monotonic, at set_tasks' claim
        self.builds = not helper
        self._shash: dict[str, str] = {}
        self._rows = False  # the rows were written and claimed: tune only those held
        #: The task names this attempt claimed.
        self.claimed: list[str] = []

    def set_tasks(self, tasks: list[TaskProgress], budget_s: float | None = None) -> None:
        """Start tuning ``tasks``: write their rows (once per job), claim them, report them."""
        from farm.tuning.task_rows import TaskWork

        super().set_tasks(tasks, budget_s)
        hashes = workload_hashes(self.path.parent)
        self._shash = {t.name: hashes[t.workload_index] for t in tasks
                       if 0 <= t.workload_index < len(hashes)}
        now = self._clock.now()
        try:
            self.store.add_task_work(self.job_id, [
                TaskWork(self._shash[t.name], t.name, t.trials_asked)
                for t in tasks if t.name in self._shash], now)
            limit = (len(tasks) + 1) // 2 if self.share and not self.helper else None
            claimed = self.store.claim_task_work(self.job_id, self.attempt_id, self.host, now,
                                                 limit=limit)
        except StoreError as exc:
            log.warning("task_work_not_claimed", job_id=self.job_id, reason=str(exc))
            return
        self.claimed, self._rows = [c.task for c in claimed], True
        self._claimed_at_s = self._clock.monotonic()
        log.info("task_work_claimed", job_id=self.job_id, attempt_id=self.attempt_id,
                 tasks=self.claimed)
        for t in tasks:
            self._report(t.name, t.trials_measured, t.best_s)

    def tasks_to_tune(self, names: list[str]) -> list[str]:
        """Of ``names``, the tasks whose rows this attempt holds (all: no rows were written)."""
        return [n for n in names if n in self.claimed] if self._rows else list(names)

    def take_over(self) -> list[str]:
        """Claim the rows no live attempt holds; the main attempt first waits for them.

        A main attempt that shares its tasks first leaves the rows no attempt
        claimed yet to a helper, until ``helper_wait_s`` after its own claim
        (or the time budget left, if less) or until every row was claimed:
        without this wait, done with its half before the other host's helper
        started, it would take the helper's half itself.

        Then the main attempt polls every ``poll_s`` for at most the time budget left
        (:meth:`budget_left_s`) until no other live attempt tunes a task of the
        job, or one of them stopped (a farmd killed with -9: its lease ran out)
        and its row is claimed here. A wait that runs out leaves the build to
        fail on the rows left (:class:`BuildHeld`): the job is tried again. A
        helper claims what is free now and never waits.

        Returns:
            The tasks claimed now (this attempt tunes them next); empty once no
            other attempt's task is left to take over.
        """
        if not self._rows:
            return []

        def settled() -> list[str] | bool:
            now = self._clock.now()
            try:
                taken = [r.task for r in self.store.claim_task_work(
                    self.job_id, self.attempt_id, self.host, now) if r.task not in self.claimed]
                return taken or self.helper or not self.store.busy_task_work(
                    self.job_id, self.attempt_id, now)
            except StoreError as exc:
                log.warning("task_work_not_read", job_id=self.job_id, reason=str(exc))
                return self.helper

        log.info("task_work_waiting", job_id=self.job_id, attempt_id=self.attempt_id)
        left_s = self.budget_left_s()
        if self.share and not self.helper:
            self._wait_for_a_helper(left_s)
            left_s = self.budget_left_s()
        found = wait_until(settled, self.wait_s if left_s is None else max(0.0, left_s),
                           interval_s=self.poll_s, clock=self._clock)
        taken = found if isinstance(found, list) else []
        if taken:
            self.claimed += taken
            log.info("task_work_taken_over", job_id=self.job_id, attempt_id=self.attempt_id,
                     tasks=taken)
        return taken

    def _wait_for_a_helper(self, left_s: float | None) -> None:
        """Wait (at most ``helper_wait_s`` from the claim) until no row is left unclaimed."""
        from farm.tuning.task_rows import DONE

        since_s = self._clock.monotonic() - (self._claimed_at_s or 0.0)
        wait_s = max(0.0, self.helper_wait_s - since_s)
        if left_s is not None:
            wait_s = min(wait_s, max(0.0, left_s))

        def all_claimed() -> bool:
            try:
                return all(r.attempt_id is not None or r.state == DONE
                           for r in self.store.task_work(self.job_id))
            except StoreError as exc:
                log.warning("task_work_not_read", job_id=self.job_id, reason=str(exc))
                return False

        if wait_s > 0 and not all_claimed():
            log.info("task_work_left_to_a_helper", job_id=self.job_id,
                     attempt_id=self.attempt_id, wait_s=round(wait_s, 1))
            wait_until(all_claimed, wait_s, interval_s=self.poll_s, clock=self._clock)

    def update_task(self, name: str, trials_measured: int, best_s: float) -> None:
        """Record a task's trials in the work folder and in its row."""
        super().update_task(name, trials_measured, best_s)
        self._report(name, trials_measured, best_s)

    def set_phase(self, phase: str) -> None:
        """Say what the attempt does now; at :data:`BUILD_PHASE`, claim the job's one build.

        Raises:
            BuildHeld: another live attempt holds the build, or tunes a task still.
            StoreError: the database refused the claim.
        """
        if phase == BUILD_PHASE:
            self._claim_build()
        super().set_phase(phase)

    def finish_build(self) -> None:
        """Mark the job's build made (logged, not raised, when the store refuses it)."""
        try:
            made = self.store.finish_tune_build(self.job_id, self.attempt_id, self._clock.now())
        except StoreError as exc:
            log.warning("tune_build_not_marked", job_id=self.job_id, reason=str(exc))
            return
        log.info("tune_build_made", job_id=self.job_id, attempt_id=self.attempt_id, marked=made)

    def _claim_build(self) -> None:
        from farm.tuning.task_rows import BuildClaim

        now = self._clock.now()
        self.store.close_task_work(self.job_id, self.attempt_id, now)
        claim = self.store.claim_tune_build(self.job_id, self.attempt_id, self.host, now)
        log.info("tune_build_claim", job_id=self.job_id, attempt_id=self.attempt_id,
                 claim=claim.value)
        if claim is not BuildClaim.BUILD:
            raise BuildHeld(f"job {self.job_id}'s tuned build: {claim.value} "
                            "(another attempt of the job holds it or tunes a task)")

    def _report(self, name: str, trials_measured: int, best_s: float | None) -> None:
        shash = self._shash.get(name)
        if shash is None or name not in self.claimed:
            return
        try:
            held = self.store.report_task_work(self.job_id, self.attempt_id, shash,
                                               trials_measured, best_s, self._clock.now())
        except StoreError as exc:
            log.warning("task_work_not_reported", job_id=self.job_id, task=name, reason=str(exc))
            return
        if not held:
            log.warning("task_work_lost", job_id=self.job_id, task=name,
                        attempt_id=self.attempt_id)


@contextmanager
def build_made(progress: TuneProgress) -> Iterator[None]:
    """Around ``tune_model``: once it returns (its tuned build made), mark the job's build made."""
    yield
    if isinstance(progress, TaskWorkProgress) and progress.builds:
        progress.finish_build()


def job_progress(store: TaskRows, job_id: int, work_dir: Path) -> TuneCounters | None:
    """A tuning job's progress: its tasks from the database, the rest from this host's folder.

    The task rows hold every host's trials, so a job tuned (or resumed) on
    another host shows its tasks here too; the counters kept in the work
    folder (attempts, phase, rate) are this host's alone, empty without one.

    Args:
        store: the job's task rows (the queue's ``Store``).
        job_id: the job.
        work_dir: its tuning work folder on this host (:func:`farm.jobs.tuning_db.tune_work_dir`).

    Returns:
        None for a job with neither task rows nor a work folder (not a tuning job).

    Raises:
        StoreError: the database cannot be read.
    """
    local = read_counters(work_dir)
    rows = store.task_work(job_id)
    if not rows:
        return local
    base = local or TuneCounters()
    return replace(base, tasks=tasks_from_rows(rows, base.tasks))
