"""A model tune job's task work rows and its one build (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest
from queue_helpers import ARM64, add_ready, gemm_spec

from farm.clock import FakeClock
from farm.config import JobSettings
from farm.jobs.tuning_db import WORKLOADS_FILE
from farm.queue import Assignment, Store
from farm.queue.models import Attempt
from farm.queue.states import AttemptState
from farm.queue.task_work import BuildClaim, TaskWork
from farm.tuning.counters import TaskProgress
from farm.tuning.work_progress import (
    BUILD_PHASE,
    BuildHeld,
    TaskWorkProgress,
    build_made,
    job_progress,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE_S = 60.0
TASKS = [TaskWork("111", "conv", 2), TaskWork("222", "dense", 2), TaskWork("333", "add", 2)]


def two_attempts(store: Store) -> tuple[int, int, int]:
    """A job with its attempt on P1 and a second running attempt (a helper) on P2."""
    add_ready(store, "P1", "P2", facts={**ARM64, "model": "Pixel 7"})
    job_id = store.enqueue(gemm_spec(), T0)
    (claim,) = store.claim([Assignment(job_id, ("P1",), LEASE_S)], T0, host="a")
    with store._tx() as session:
        helper = Attempt(job_id=job_id, serials=["P2"], lease_s=LEASE_S, host="b",
                         lease_expires_at=T0 + timedelta(seconds=LEASE_S), heartbeat_at=T0,
                         started_at=T0)
        session.add(helper)
        session.flush()
        helper_id = helper.id
    return job_id, claim.attempt.id, helper_id


class TestClaim:
    def test_rows_are_written_once_in_tuning_order(self, store: Store) -> None:
        """A second writer (a retry, a helper) adds no row and keeps the first budget."""
        job_id, _, _ = two_attempts(store)
        assert store.add_task_work(job_id, TASKS, T0) == 3
        assert store.add_task_work(job_id, [TaskWork("111", "conv", 9)], T0) == 0
        rows = store.task_work(job_id)
        assert [(r.task, r.trials, r.state) for r in rows] == [
            ("conv", 2, "queued"), ("dense", 2, "queued"), ("add", 2, "queued")]

    def test_two_live_attempts_never_hold_one_row(self, store: Store) -> None:
        """Each claim takes rows no live attempt holds; claiming again returns one's own only."""
        job_id, first, helper = two_attempts(store)
        store.add_task_work(job_id, TASKS, T0)
        assert [r.task for r in store.claim_task_work(job_id, first, "a", T0, limit=1)] == ["conv"]
        assert [r.task for r in store.claim_task_work(job_id, helper, "b", T0, limit=1)] == [
            "dense"]
        assert [r.task for r in store.claim_task_work(job_id, first, "a", T0, limit=2)] == [
            "conv", "add"]
        assert store.claim_task_work(job_id, helper, "b", T0) == [
            r for r in store.task_work(job_id) if r.task == "dense"]
        assert {r.task: (r.attempt_id, r.host, r.state) for r in store.task_work(job_id)} == {
            "conv": (first, "a", "tuning"), "dense": (helper, "b", "tuning"),
            "add": (first, "a", "tuning")}

    def test_rows_of_an_attempt_that_stopped_running_are_claimed_again(
            self, store: Store) -> None:
        """A holder whose lease ran out (farmd killed with -9) loses its rows to a live
        attempt; its late report is refused and changes nothing."""
        job_id, first, helper = two_attempts(store)
        store.add_task_work(job_id, TASKS, T0)
        store.claim_task_work(job_id, first, "a", T0)
        assert store.claim_task_work(job_id, helper, "b", T0) == []  # first still holds them
        later = T0 + timedelta(seconds=LEASE_S - 1)
        assert store.heartbeat(helper, later)
        after_lease = T0 + timedelta(seconds=LEASE_S + 1)
        taken = store.claim_task_work(job_id, helper, "b", after_lease)
        assert [r.task for r in taken] == ["conv", "dense", "add"]
        assert not store.report_task_work(job_id, first, "111", 2, 0.001, after_lease)
        assert store.task_work(job_id)[0].trials_measured == 0

    def test_a_report_at_the_budget_makes_the_row_done(self, store: Store) -> None:
        """Trials are never lowered, the best run time is the least; a done row is not
        claimed again, even after its attempt ended."""
        job_id, first, helper = two_attempts(store)
        store.add_task_work(job_id, TASKS[:1], T0)
        store.claim_task_work(job_id, first, "a", T0)
        assert store.report_task_work(job_id, first, "111", 1, 0.002, T0)
        assert store.report_task_work(job_id, first, "111", 0, float("inf"), T0)
        (row,) = store.task_work(job_id)
        assert (row.trials_measured, row.best_s, row.state) == (1, 0.002, "tuning")
        assert store.report_task_work(job_id, first, "111", 2, 0.001, T0)
        (row,) = store.task_work(job_id)
        assert (row.trials_measured, row.best_s, row.state) == (2, 0.001, "done")
        assert store.claim_task_work(job_id, helper, "b", T0 + timedelta(hours=1)) == []


class TestBuild:
    def test_the_build_is_claimed_once_after_every_task_is_done(self, store: Store) -> None:
        """Not before the last task is done; then one attempt builds, the other waits."""
        job_id, first, helper = two_attempts(store)
        store.add_task_work(job_id, TASKS[:2], T0)
        store.claim_task_work(job_id, first, "a", T0, limit=1)
        store.claim_task_work(job_id, helper, "b", T0)
        store.report_task_work(job_id, first, "111", 2, 0.001, T0)
        assert store.claim_tune_build(job_id, first, "a", T0) is BuildClaim.TASKS_LEFT
        assert store.close_task_work(job_id, first, T0) == 0  # its row is done already
        assert store.close_task_work(job_id, helper, T0) == 1  # its time budget ran out
        assert store.claim_tune_build(job_id, helper, "b", T0) is BuildClaim.BUILD
        assert store.claim_tune_build(job_id, first, "a", T0) is BuildClaim.HELD
        assert store.claim_tune_build(job_id, helper, "b", T0) is BuildClaim.BUILD
        assert not store.finish_tune_build(job_id, first, T0)
        assert store.tune_build(job_id) == (helper, "b", None)
        assert store.finish_tune_build(job_id, helper, T0)
        assert store.tune_build(job_id) == (helper, "b", T0)
        assert store.claim_tune_build(job_id, first, "a", T0) is BuildClaim.BUILT
        assert store.claim_tune_build(job_id, helper, "b", T0) is BuildClaim.BUILT
        gone = T0 + timedelta(seconds=LEASE_S + 1)  # helper's library went with its host
        assert store.heartbeat(first, T0 + timedelta(seconds=LEASE_S - 1))
        assert store.claim_tune_build(job_id, first, "a", gone) is BuildClaim.BUILD

    def test_a_build_whose_holder_stopped_is_taken_over(
            self, store: Store) -> None:
        """The holder's attempt ended without building: the other attempt builds."""
        job_id, first, helper = two_attempts(store)
        store.add_task_work(job_id, TASKS[:1], T0)
        store.claim_task_work(job_id, first, "a", T0)
        store.report_task_work(job_id, first, "111", 2, 0.001, T0)
        assert store.claim_tune_build(job_id, first, "a", T0) is BuildClaim.BUILD
        with store._tx() as session:
            attempt = session.get(Attempt, first)
            assert attempt is not None
            attempt.state = AttemptState.ABANDONED
        assert store.claim_tune_build(job_id, helper, "b", T0) is BuildClaim.BUILD
        assert not store.finish_tune_build(job_id, first, T0)
        assert store.finish_tune_build(job_id, helper, T0)


def work_dir_with(tmp_path: Path, name: str, *shashes: str) -> Path:
    """A work folder whose ``database_workload.json`` holds ``shashes``, one a line."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / WORKLOADS_FILE).write_text("".join(f'["{s}", "bW9k"]\n' for s in shashes))
    return folder


class TestAttemptProgress:
    def test_the_attempt_s_tasks_and_trials_reach_the_rows_and_any_host_reads_them(
            self, store: Store, tmp_path: Path) -> None:
        """set_tasks writes and claims the rows; each batch's trials go to them; a host
        without the work folder reads the tasks from the database."""
        job_id, first, _ = two_attempts(store)
        progress = TaskWorkProgress(work_dir_with(tmp_path, "a", "111", "222"), store, job_id,
                                    first, "a", FakeClock(T0))
        progress.set_tasks([TaskProgress("conv", 1, 2, 1), TaskProgress("dense", 0, 2, 0)])
        progress.update_task("dense", 1, 0.004)
        other_host = job_progress(store, job_id, tmp_path / "absent")
        assert other_host is not None
        assert [(t.name, t.workload_index, t.trials_asked, t.trials_measured, t.best_s)
                for t in other_host.tasks] == [("conv", -1, 2, 1, None),
                                               ("dense", -1, 2, 1, 0.004)]
        assert {r.shash: r.attempt_id for r in store.task_work(job_id)} == {
            "222": first, "111": first}
        assert job_progress(store, job_id + 1, tmp_path / "absent") is None

    def test_only_one_attempt_builds(self, store: Store, tmp_path: Path) -> None:
        """The compiling phase closes the attempt's rows and claims the build; another live
        attempt of the job reaching it raises BuildHeld instead of building again."""
        job_id, first, helper = two_attempts(store)
        mine = TaskWorkProgress(work_dir_with(tmp_path, "a", "111"), store, job_id, first, "a",
                                FakeClock(T0))
        mine.set_tasks([TaskProgress("conv", 0, 2, 0)])
        mine.set_phase(BUILD_PHASE)  # stopped by time: its row is closed, the build is its
        assert mine.counters.phase == BUILD_PHASE
        theirs = TaskWorkProgress(work_dir_with(tmp_path, "b", "111"), store, job_id, helper,
                                  "b", FakeClock(T0))
        theirs.set_tasks([TaskProgress("conv", 0, 2, 0)])
        assert theirs.claimed == []  # the row is done
        with pytest.raises(BuildHeld, match="held"):
            theirs.set_phase(BUILD_PHASE)
        with build_made(mine):
            pass
        with pytest.raises(BuildHeld, match="built"):
            theirs.set_phase(BUILD_PHASE)


class TestTwoHostsShareTheTasks:
    def both(self, store: Store, tmp_path: Path, budget_s: float = 600.0) -> tuple[
            int, int, int, TaskWorkProgress, TaskWorkProgress, FakeClock]:
        """The job's main attempt (sharing) and its helper, each past set_tasks."""
        job_id, first, helper = two_attempts(store)
        clock = FakeClock(T0)
        tasks = [TaskProgress("conv", 0, 2, 0), TaskProgress("dense", 1, 2, 0)]
        main = TaskWorkProgress(work_dir_with(tmp_path, "a", "111", "222"), store, job_id,
                                first, "a", clock, share=True, poll_s=0.01)
        main.set_tasks(tasks, budget_s=budget_s)
        aid = TaskWorkProgress(work_dir_with(tmp_path, "b", "111", "222"), store, job_id,
                               helper, "b", clock, helper=True, poll_s=0.01)
        aid.set_tasks(tasks, budget_s=budget_s)
        return job_id, first, helper, main, aid, clock

    def test_the_main_claims_the_heaviest_half_and_the_helper_the_rest(
            self, store: Store, tmp_path: Path) -> None:
        """Each tunes only its rows; the helper takes over nothing and never builds."""
        _, _, _, main, aid, _ = self.both(store, tmp_path)
        assert main.tasks_to_tune(["conv", "dense"]) == ["conv"]
        assert aid.tasks_to_tune(["conv", "dense"]) == ["dense"]
        assert main.builds and not aid.builds
        assert aid.take_over() == []

    def test_the_main_takes_over_the_task_of_a_helper_that_stopped(
            self, store: Store, tmp_path: Path) -> None:
        """The helper's farmd killed with -9: once its lease ran out its row is the main's."""
        job_id, first, _, main, _, clock = self.both(store, tmp_path)
        clock.advance(LEASE_S + 1)
        assert store.heartbeat(first, clock.now())
        assert main.take_over() == ["dense"]
        assert main.tasks_to_tune(["conv", "dense"]) == ["conv", "dense"]
        assert {r.task: r.attempt_id for r in store.task_work(job_id)} == {
            "conv": first, "dense": first}

    def test_the_main_waits_for_a_live_helper_until_its_budget_is_spent(
            self, store: Store, tmp_path: Path) -> None:
        """No budget left: one look, nothing taken; the row stays the live helper's and the
        build refuses. Once the helper's task is done the main builds."""
        job_id, _, _, main, aid, _ = self.both(store, tmp_path, budget_s=0.0)
        assert main.take_over() == []
        assert [r.task for r in store.busy_task_work(job_id, main.attempt_id, T0)] == ["dense"]
        with pytest.raises(BuildHeld, match="tasks left"):  # the job is tried again
            main.set_phase(BUILD_PHASE)
        aid.update_task("dense", 2, 0.003)
        assert store.busy_task_work(job_id, main.attempt_id, T0) == []
        main.update_task("conv", 2, 0.002)
        main.set_phase(BUILD_PHASE)
        assert store.tune_build(job_id) == (main.attempt_id, "a", None)


class ScriptedClock(FakeClock):
    """A fake clock whose every monotonic read moves both clocks ``step_s`` on, running what is due.

    So a wait on it passes in fake seconds, and a step of the other host (a helper's
    claim, its report) happens at a known second of that wait.
    """

    def __init__(self, start: datetime, step_s: float = 1.0) -> None:
        super().__init__(start, monotonic_s=0.0)
        self.step_s = step_s
        self.actions: list[tuple[float, Callable[[], object]]] = []

    def at(self, second: float, action: Callable[[], object]) -> None:
        """Run ``action`` once the monotonic clock reads ``second`` or more."""
        self.actions.append((second, action))

    def monotonic(self) -> float:
        reading = super().monotonic()
        self.advance(self.step_s)
        due = [a for a in self.actions if a[0] <= reading]
        self.actions = [a for a in self.actions if a[0] > reading]
        for _, action in due:
            action()
        return reading


class TestTheMainLeavesRowsToAHelper:
    """A sharing main attempt done with its half before a helper started (CI run18's race)."""

    TASKS: ClassVar[list[TaskProgress]] = [TaskProgress("conv", 0, 2, 0),
                                           TaskProgress("dense", 1, 2, 0)]

    def main(self, store: Store, tmp_path: Path, clock: FakeClock) -> tuple[
            int, int, TaskWorkProgress]:
        job_id, first, helper = two_attempts(store)
        # The default wait a user gets (jobs.tune_helper_wait_s); polled fast, in fake seconds.
        main = TaskWorkProgress(work_dir_with(tmp_path, "a", "111", "222"), store, job_id,
                                first, "a", clock, share=True, poll_s=0.01)
        main.set_tasks(self.TASKS, budget_s=600.0)
        assert main.claimed == ["conv"]
        return job_id, helper, main

    def test_a_helper_that_comes_late_still_gets_the_rest(
            self, store: Store, tmp_path: Path) -> None:
        """The helper claims at second 10 of the main's wait and finishes at 20: the main
        takes nothing over, and the helper's row is the helper's."""
        clock = ScriptedClock(T0)
        job_id, helper, main = self.main(store, tmp_path, clock)
        aid = TaskWorkProgress(work_dir_with(tmp_path, "b", "111", "222"), store, job_id,
                               helper, "b", clock, helper=True, poll_s=0.01)
        clock.at(10, lambda: aid.set_tasks(self.TASKS, budget_s=600.0))
        clock.at(20, lambda: aid.update_task("dense", 2, 0.003))
        assert main.take_over() == []
        assert aid.claimed == ["dense"]
        assert {r.task: (r.attempt_id, r.state) for r in store.task_work(job_id)} == {
            "conv": (main.attempt_id, "tuning"), "dense": (helper, "done")}

    def test_with_no_helper_the_main_tunes_the_rest_after_its_wait(
            self, store: Store, tmp_path: Path) -> None:
        """No helper within helper_wait_s of the main's claim: the main claims the row."""
        clock = ScriptedClock(T0, step_s=10.0)
        _, _, main = self.main(store, tmp_path, clock)
        claimed_at_s = clock.monotonic()
        assert main.take_over() == ["dense"]
        assert clock.monotonic() - claimed_at_s >= JobSettings().tune_helper_wait_s >= 30
        assert main.tasks_to_tune(["conv", "dense"]) == ["conv", "dense"]

    def test_a_spent_time_budget_cuts_the_wait_short(
            self, store: Store, tmp_path: Path) -> None:
        """With no time left the main does not wait for a helper: it claims the rest."""
        clock = ScriptedClock(T0)
        job_id, first, _ = two_attempts(store)
        main = TaskWorkProgress(work_dir_with(tmp_path, "a", "111", "222"), store, job_id,
                                first, "a", clock, share=True, poll_s=0.01, helper_wait_s=30)
        main.set_tasks(self.TASKS, budget_s=0.0)
        started_s = clock.monotonic()
        assert main.take_over() == ["dense"]
        assert clock.monotonic() - started_s < 10
