"""A model tune job's task work rows and its one build (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from queue_helpers import ARM64, add_ready, gemm_spec

from farm.queue import Assignment, Store
from farm.queue.models import Attempt
from farm.queue.states import AttemptState
from farm.queue.task_work import BuildClaim, TaskWork

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
        store.report_task_work(job_id, helper, "222", 2, 0.001, T0)
        assert store.claim_tune_build(job_id, helper, "b", T0) is BuildClaim.BUILD
        assert store.claim_tune_build(job_id, first, "a", T0) is BuildClaim.HELD
        assert store.claim_tune_build(job_id, helper, "b", T0) is BuildClaim.BUILD
        assert not store.finish_tune_build(job_id, first, T0)
        assert store.finish_tune_build(job_id, helper, T0)
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
