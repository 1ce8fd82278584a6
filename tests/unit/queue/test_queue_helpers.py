"""Helper attempts: another host's idle phones join a running model tune job."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from queue_helpers import ARM64, add_ready, held_phone_select
from sqlalchemy import update

from farm.errors import Retry
from farm.queue import Assignment, Store
from farm.queue.helpers import HelperKind
from farm.queue.models import Device
from farm.queue.records import Decision, Failure, Outcome
from farm.queue.states import AttemptState, DeviceState, JobState
from farm.queue.task_work import TaskWork

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE_S = 60.0
#: The tune kind's hook as the dispatcher hands it down: a model tune takes helpers.
HELPERS = {"tune": HelperKind(LEASE_S, lambda params: bool(params.get("model")))}
TASKS = [TaskWork("111", "conv", 2), TaskWork("222", "dense", 2)]
PIXEL = {**ARM64, "model": "Pixel 7"}


def on_host(store: Store, host: str, *serials: str) -> None:
    """Own ``serials`` by ``host`` (as adopt_device would)."""
    with store._tx() as session:
        session.execute(update(Device).where(Device.serial.in_(serials)).values(host=host))


@pytest.fixture
def job(store: Store, tmp_path: Path) -> tuple[int, int]:
    """A model tune job running on host a's P1, its two task rows written; P2, P3 on host b."""
    model = tmp_path / "m.onnx"
    model.write_bytes(b"onnx")
    add_ready(store, "P1", "P2", facts=PIXEL)
    add_ready(store, "P3", facts={**ARM64, "model": "Galaxy S10"})
    on_host(store, "a", "P1")
    on_host(store, "b", "P2", "P3")
    job_id = store.enqueue({"kind": "tune", "params": {"model": {"path": str(model)},
                                                       "phones": 1}}, T0)
    (claim,) = store.claim([Assignment(job_id, ("P1",), LEASE_S)], T0, host="a")
    store.add_task_work(job_id, TASKS, T0)
    return job_id, claim.attempt.id


class TestClaimHelpers:
    def test_a_free_row_brings_a_helper_on_another_hosts_phone_of_the_same_model(
            self, store: Store, job: tuple[int, int]) -> None:
        """Only P2 (host b, Pixel 7) fits: not host a's, not another model's; the job is
        untouched (running, one attempt made); a second helper of the job is refused."""
        job_id, main = job
        store.claim_task_work(job_id, main, "a", T0, limit=1)
        assert store.claim_helpers("a", HELPERS, T0) == []  # the main's own host
        (helper,) = store.claim_helpers("b", HELPERS, T0)
        assert helper.attempt.helper and helper.attempt.serials == ("P2",)
        assert helper.attempt.host == "b" and helper.job.id == job_id
        record = store.get_job(job_id)
        assert record is not None and record.state is JobState.RUNNING
        assert record.attempts_made == 1
        assert store.get_device("P2").state is DeviceState.BUSY  # type: ignore[union-attr]
        assert store.claim_helpers("b", HELPERS, T0) == []
        assert [r.task for r in store.claim_task_work(job_id, helper.attempt.id, "b", T0)] == [
            "dense"]

    def test_no_helper_while_the_main_holds_every_row(
            self, store: Store, job: tuple[int, int]) -> None:
        job_id, main = job
        store.claim_task_work(job_id, main, "a", T0)
        assert store.claim_helpers("b", HELPERS, T0) == []

    @pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
    def test_a_phone_reserved_while_the_helper_claim_selects_it_is_left_alone(
            self, store_url: str, store: Store, job: tuple[int, int]) -> None:
        """P2 is reserved while the helper claim's select of phones is held after its
        snapshot (:func:`held_phone_select`): no helper starts on it. PostgreSQL only, as
        the claim's race (``test_queue_reservations``)."""
        job_id, main = job
        store.claim_task_work(job_id, main, "a", T0, limit=1)
        helpers: list[object] = []
        with held_phone_select(store_url) as wait_held, Store(store_url) as claiming:
            thread = threading.Thread(target=lambda: helpers.extend(
                claiming.claim_helpers("b", HELPERS, T0)))
            thread.start()
            wait_held()
            store.reserve("P2", "alice", T0 + timedelta(hours=1), T0)
            thread.join(60)
        assert helpers == []
        assert store.get_device("P2").state is DeviceState.READY  # type: ignore[union-attr]


class TestHelperMayCome:
    """What the main attempt asks before it leaves half its task rows to a helper."""

    def test_only_another_hosts_device_a_helper_could_hold_counts(
            self, store: Store, job: tuple[int, int]) -> None:
        """P2 (host b, the main's model) counts; P3 (another model) and host a's own never
        do; P2 drained, or reserved, counts no more: claim_helper would not take it."""
        _, main = job
        assert store.helper_may_come(main, T0)
        store.set_drained("P2", True, "test", T0)
        assert not store.helper_may_come(main, T0)
        store.set_drained("P2", False, "test", T0)
        assert store.helper_may_come(main, T0)
        store.reserve("P2", "alice", T0 + timedelta(hours=1), T0)
        assert not store.helper_may_come(main, T0)
        assert not store.helper_may_come(main + 99, T0)  # an unknown attempt


class TestHelperEnds:
    def helper(self, store: Store, job: tuple[int, int]) -> int:
        job_id, main = job
        store.claim_task_work(job_id, main, "a", T0, limit=1)
        (claim,) = store.claim_helpers("b", HELPERS, T0)
        store.claim_task_work(job_id, claim.attempt.id, "b", T0)
        return claim.attempt.id

    def test_its_finish_stores_no_result_and_leaves_the_job_running(
            self, store: Store, job: tuple[int, int]) -> None:
        helper = self.helper(store, job)
        assert store.finish(helper, Outcome({"tasks": []}, [], "s"), T0)
        assert store.results(job[0]) == []
        assert store.get_job(job[0]).state is JobState.RUNNING  # type: ignore[union-attr]
        assert store.get_device("P2").state is DeviceState.READY  # type: ignore[union-attr]

    def test_its_failure_never_requeues_or_fails_the_job(
            self, store: Store, job: tuple[int, int]) -> None:
        helper = self.helper(store, job)
        failure = Failure("PhoneFault", Retry.NEVER, "gone", "P2")
        assert store.fail_attempt(helper, failure, T0) is Decision.HELPER_ENDED
        record = store.get_job(job[0])
        assert record is not None and record.state is JobState.RUNNING
        assert record.attempts_made == 1
        assert store.heartbeat(job[1], T0)  # the main goes on

    def test_its_lease_running_out_frees_its_rows_for_the_main_not_the_job_for_a_retry(
            self, store: Store, job: tuple[int, int]) -> None:
        """farmd of host b killed with -9: the reap ends the helper alone; its row is the
        main's to claim; the job is neither requeued nor another attempt counted."""
        helper = self.helper(store, job)
        late = T0 + timedelta(seconds=LEASE_S + 1)
        assert store.heartbeat(job[1], late - timedelta(seconds=2))
        assert [a.id for a in store.reap(late)] == [helper]
        record = store.get_job(job[0])
        assert record is not None and record.state is JobState.RUNNING
        assert record.attempts_made == 1
        states = {a.id: a.state for a in store.attempts(job[0])}
        assert states == {job[1]: AttemptState.RUNNING, helper: AttemptState.ABANDONED}
        assert [r.task for r in store.claim_task_work(job[0], job[1], "a", late)] == [
            "conv", "dense"]

    def test_a_retry_of_the_job_never_starts_beside_its_helper_on_one_host(
            self, store: Store, job: tuple[int, int]) -> None:
        """One writer per host's work folder of a job: the main's retry is refused on host
        b (P1 moved there, ready) while the job's helper runs there."""
        job_id, main = job
        self.helper(store, job)
        store.requeue(main, "farmd stopping", T0)
        on_host(store, "b", "P1")
        assert store.claim([Assignment(job_id, ("P1",), LEASE_S)], T0, host="b") == []
