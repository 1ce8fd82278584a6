"""Tests of farm.queue.store.Store on a real database per test (SQLite, and PostgreSQL if set)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from device_states import put_state
from queue_helpers import ARM64, T0, add_ready, gemm_spec, plan
from structlog.testing import capture_logs

from farm.errors import CompileError, JobTimeout, Retry, SessionError, SpecError
from farm.queue import (
    Assignment,
    AttemptState,
    Decision,
    DeviceHealth,
    DeviceState,
    Failure,
    JobState,
    Outcome,
    SnapshotData,
    Store,
    TuningData,
)

OK = Outcome(summary={"median_s": 0.002}, samples=[0.0021, 0.0019, 0.002])


def start(store: Store, job_id: int, *serials: str, now=T0, lease_s: float = 60.0):
    """Claim one job on the given phones; returns the Claim."""
    (claim,) = store.claim([Assignment(job_id, serials, lease_s)], now)
    return claim


class TestEnqueue:
    """enqueue validates, then stores durably."""

    def test_enqueue_is_durable(self, store_url: str) -> None:
        """A job enqueued and the store closed is there when the store reopens."""
        with Store(store_url) as first:
            job_id = first.enqueue(gemm_spec(priority=4), T0)
        with Store(store_url) as second:
            job = second.get_job(job_id)
        assert job is not None
        assert (job.state, job.priority, job.kind, job.attempts_max) == (
            JobState.QUEUED,
            4,
            "gemm",
            3,
        )
        assert job.spec["params"]["bn"] == 32
        assert job.submitted_at == T0

    def test_bad_spec_is_not_stored(self, store: Store) -> None:
        """A bad spec raises SpecError and leaves no row behind."""
        with pytest.raises(SpecError) as caught:
            store.enqueue({"kind": "gemm", "params": {"n": 3}}, T0)
        assert caught.value.field == "params.n"
        assert store.list_jobs() == []

    def test_list_and_cancel(self, store: Store) -> None:
        """A queued job can be cancelled once; listing filters by state."""
        a, b = store.enqueue(gemm_spec(), T0), store.enqueue(gemm_spec(), T0)
        assert store.cancel(a, T0) is True
        assert store.cancel(a, T0) is False
        assert [j.id for j in store.list_jobs([JobState.QUEUED])] == [b]
        assert [j.id for j in store.list_jobs()] == [b, a]


class TestClaim:
    """claim applies assignments atomically and only while still valid."""

    def test_claim_marks_job_running_and_phones_busy(self, store: Store) -> None:
        """A claim starts an attempt holding a lease and makes its phones busy."""
        add_ready(store, "a", "b")
        job_id = store.enqueue(gemm_spec(devices={"count": 2}), T0)
        claims = store.claim(plan(store.snapshot(), T0), T0)
        assert len(claims) == 1
        claim = claims[0]
        assert claim.job.id == job_id and claim.job.state is JobState.RUNNING
        assert sorted(claim.attempt.serials) == ["a", "b"]
        assert claim.attempt.lease_expires_at == T0 + timedelta(seconds=120)
        for device in store.list_devices():
            assert device.state is DeviceState.BUSY and device.attempt_id == claim.attempt.id

    def test_stale_assignment_is_skipped(self, store: Store) -> None:
        """A second claim of the same plan, or onto a phone no longer ready, changes nothing."""
        add_ready(store, "a", "b")
        first = store.enqueue(gemm_spec(), T0)
        second = store.enqueue(gemm_spec(), T0)
        assignments = plan(store.snapshot(), T0)
        assert len(store.claim(assignments, T0)) == 2
        assert store.claim(assignments, T0) == []
        assert store.claim([Assignment(first, ("a",), 60)], T0) == []
        third = store.enqueue(gemm_spec(), T0)
        put_state(store, "b", DeviceState.OFFLINE, "unplugged", T0)
        assert store.claim([Assignment(third, ("b",), 60)], T0) == []
        assert store.get_job(third).state is JobState.QUEUED
        assert store.get_job(second).attempts_made == 1

    def test_drained_phone_gets_no_work(self, store: Store) -> None:
        """A drained ready phone is neither planned nor claimable."""
        add_ready(store, "a")
        assert store.set_drained("a", True, "maintenance", T0) == ["drained"]
        job_id = store.enqueue(gemm_spec(), T0)
        assert plan(store.snapshot(), T0) == []
        assert store.claim([Assignment(job_id, ("a",), 60)], T0) == []

    def test_concurrent_claims_start_each_job_once(self, store_url: str) -> None:
        """Two stores claiming the same plan at once start every job exactly once."""
        with Store(store_url) as setup:
            add_ready(setup, *[f"p{i}" for i in range(6)])
            for _ in range(6):
                setup.enqueue(gemm_spec(), T0)
            assignments = plan(setup.snapshot(), T0)
        results: list[list] = []
        barrier = threading.Barrier(2)

        def claimer() -> None:
            with Store(store_url) as own:
                barrier.wait(timeout=10)
                results.append(own.claim(assignments, T0))

        threads = [threading.Thread(target=claimer) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        started = [c.job.id for batch in results for c in batch]
        assert sorted(started) == sorted(a.job_id for a in assignments)


class TestLeases:
    """heartbeat extends leases; reap ends the expired ones."""

    def test_heartbeat_extends_lease(self, store: Store) -> None:
        """A heartbeat moves the lease to now + lease_s, so reap at the old expiry keeps it."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(), T0), "a")
        assert store.heartbeat(claim.attempt.id, T0 + timedelta(seconds=50)) is True
        assert store.reap(T0 + timedelta(seconds=70)) == []
        (attempt,) = store.attempts(claim.job.id)
        assert attempt.lease_expires_at == T0 + timedelta(seconds=110)

    def test_reap_requeues_then_fails_abandoned(self, store: Store) -> None:
        """An expired lease requeues the job while attempts remain, then fails it as
        AbandonedJob."""
        add_ready(store, "a")
        job_id = store.enqueue(gemm_spec(attempts=2), T0)
        now = T0
        for expected in (JobState.QUEUED, JobState.FAILED):
            put_state(store, "a", DeviceState.READY, "health check passed", now)
            claim = start(store, job_id, "a", now=now)
            now += timedelta(seconds=61)
            (reaped,) = store.reap(now)
            assert reaped.id == claim.attempt.id and reaped.state is AttemptState.ABANDONED
            assert reaped.error_kind == "AbandonedJob"
            assert store.get_job(job_id).state is expected
            assert store.get_device("a").state is DeviceState.UNHEALTHY
        assert "AbandonedJob" in store.get_job(job_id).error
        assert store.heartbeat(claim.attempt.id, now) is False

    def test_requeue_at_stop_costs_no_attempt(self, store: Store) -> None:
        """A clean stop requeues the job with its attempt given back and the phone ready."""
        add_ready(store, "a")
        job_id = store.enqueue(gemm_spec(attempts=1), T0)
        claim = start(store, job_id, "a")
        assert store.requeue(claim.attempt.id, "farmd stopping", T0) is True
        assert store.get_job(job_id).state is JobState.QUEUED
        assert store.get_device("a").state is DeviceState.READY
        again = start(store, job_id, "a")  # the job's one attempt is still there
        assert again.attempt.id != claim.attempt.id
        assert store.requeue(claim.attempt.id, "twice", T0) is False

    def test_heartbeat_refused_after_cancel(self, store: Store) -> None:
        """Cancelling a running job makes its heartbeat return False; the failure report frees the
        phone."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(), T0), "a")
        assert store.cancel(claim.job.id, T0) is True
        assert store.heartbeat(claim.attempt.id, T0) is False
        stopped = Failure("Cancelled", Retry.NEVER, "stopped by farmd")
        assert store.fail_attempt(claim.attempt.id, stopped, T0) is Decision.CANCELLED
        assert store.get_job(claim.job.id).state is JobState.CANCELLED
        assert store.get_device("a").state is DeviceState.READY


class TestFinish:
    """finish commits a result exactly once."""

    def test_finish_stores_result_samples_and_snapshots(self, store: Store) -> None:
        """A finished attempt leaves one result with every raw sample, its snapshot and tuning
        records."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(), T0), "a")
        snap = SnapshotData(
            "a", T0, battery={"temp_c": 31.0}, thermal={"status": 0}, thermal_wait_s=12.5
        )
        store.record_snapshot(claim.attempt.id, snap)
        outcome = Outcome(
            summary={"median_s": 0.002},
            samples=[0.0021, 0.0019],
            sample_serials=["a", "a"],
            tuning_records=[TuningData("gemm_64", "llvm", {"trace": []})],
        )
        assert store.finish(claim.attempt.id, outcome, T0 + timedelta(seconds=5)) is True
        (result,) = store.results(claim.job.id)
        assert result.samples == (0.0021, 0.0019) and result.unit == "s"
        assert result.summary == {"median_s": 0.002}
        job = store.get_job(claim.job.id)
        assert job.state is JobState.SUCCEEDED and job.finished_at == T0 + timedelta(seconds=5)
        assert store.get_device("a").state is DeviceState.READY
        (stored,) = store.snapshots(claim.job.id)
        assert stored.thermal_wait_s == 12.5 and stored.battery == {"temp_c": 31.0}
        assert stored.attempt_id == claim.attempt.id
        assert store.tuning_records(claim.job.id) == [TuningData("gemm_64", "llvm", {"trace": []})]

    def test_second_finish_is_a_noop(self, store: Store) -> None:
        """Finishing the same attempt twice stores one result; the second call returns False."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(), T0), "a")
        assert store.finish(claim.attempt.id, OK, T0) is True
        assert store.finish(claim.attempt.id, OK, T0) is False
        assert store.count_results(claim.job.id) == 1

    def test_reaped_attempt_cannot_finish(self, store: Store) -> None:
        """A late result from an abandoned attempt is refused; the retry's result is the one
        kept."""
        add_ready(store, "a", "b")
        job_id = store.enqueue(gemm_spec(), T0)
        old = start(store, job_id, "a")
        later = T0 + timedelta(seconds=61)
        store.reap(later)
        new = start(store, job_id, "b", now=later)
        assert store.finish(old.attempt.id, OK, later) is False
        assert store.finish(new.attempt.id, OK, later) is True
        assert store.count_results(job_id) == 1
        assert store.results(job_id)[0].attempt_id == new.attempt.id

    def test_finish_after_cancel_stores_nothing(self, store: Store) -> None:
        """A cancelled job's result is dropped and its phone freed."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(), T0), "a")
        store.cancel(claim.job.id, T0)
        assert store.finish(claim.attempt.id, OK, T0) is False
        assert store.count_results(claim.job.id) == 0
        assert store.get_device("a").state is DeviceState.READY


class TestMetricQueries:
    """What farmd's metrics read: job counts by state, attempts in the order they ended."""

    def test_job_counts_by_state(self, store: Store) -> None:
        """One count per state that has jobs."""
        add_ready(store, "a")
        done, _queued, cancelled = (store.enqueue(gemm_spec(), T0) for _ in range(3))
        store.cancel(cancelled, T0)
        store.finish(start(store, done, "a").attempt.id, OK, T0)
        assert store.job_counts() == {JobState.SUCCEEDED: 1, JobState.QUEUED: 1,
                                      JobState.CANCELLED: 1}

    def test_finished_attempts_since(self, store: Store) -> None:
        """Ended attempts since a time, oldest end first; running ones are left out."""
        add_ready(store, "a", "b")
        ends = [T0 + timedelta(seconds=s) for s in (30, 10, 10)]
        ids = []
        for end in ends:
            claim = start(store, store.enqueue(gemm_spec(), T0), "a")
            store.finish(claim.attempt.id, OK, end)
            ids.append(claim.attempt.id)
        running = start(store, store.enqueue(gemm_spec(), T0), "b")
        seen = store.finished_attempts(since=T0)
        assert [a.attempt_id for a in seen] == [ids[1], ids[2], ids[0]]
        assert running.attempt.id not in [a.attempt_id for a in seen]
        assert [a.duration_s for a in seen] == [10.0, 10.0, 30.0]
        assert {a.kind for a in seen} == {"gemm"}
        assert [a.attempt_id for a in store.finished_attempts(since=T0 + timedelta(seconds=11))] \
            == [ids[0]]


class TestRetryByKind:
    """fail_attempt applies the error's Retry rule."""

    def test_user_fault_fails_now(self, store: Store) -> None:
        """A CompileError fails the job at once with its message, attempts left or not."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(attempts=5), T0), "a")
        decision = store.fail_attempt(claim.attempt.id, CompileError("gemm_64", "no such op"), T0)
        assert decision is Decision.FAILED
        job = store.get_job(claim.job.id)
        assert job.state is JobState.FAILED and "no such op" in job.error
        assert store.get_device("a").state is DeviceState.READY

    def test_phone_fault_retries_on_another_phone(self, store: Store) -> None:
        """A SessionError excludes the phone, marks it unhealthy and the retry goes elsewhere."""
        add_ready(store, "a", "b")
        job_id = store.enqueue(gemm_spec(), T0)
        claim = start(store, job_id, "a")
        assert (
            store.fail_attempt(claim.attempt.id, SessionError("a", "dropped"), T0)
            is Decision.REQUEUED
        )
        job = store.get_job(job_id)
        assert job.state is JobState.QUEUED and job.excluded_serials == ("a",)
        assert store.get_device("a").state is DeviceState.UNHEALTHY
        put_state(store, "a", DeviceState.READY, "recovered", T0)
        (assignment,) = plan(store.snapshot(), T0)
        assert assignment.serials == ("b",)

    def test_phone_fault_without_other_phone_keeps_it(self, store: Store) -> None:
        """With no other matching phone, the failed one is not held out, so the job can still
        run."""
        add_ready(store, "a")
        add_ready(store, "x86", facts={**ARM64, "abi": "x86_64", "abis": ["x86_64"]})
        claim = start(store, store.enqueue(gemm_spec(devices={"abi": "arm64-v8a"}), T0), "a")
        assert (
            store.fail_attempt(claim.attempt.id, SessionError("a", "dropped"), T0)
            is Decision.REQUEUED
        )
        put_state(store, "a", DeviceState.READY, "recovered", T0)
        (assignment,) = plan(store.snapshot(), T0)
        assert assignment.job_id == claim.job.id and assignment.serials == ("a",)

    def test_phone_fault_exclusion_holds_once_another_phone_joins(self, store: Store) -> None:
        """The failed phone is excluded even when alone, so a phone added later takes the retry."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(), T0), "a")
        store.fail_attempt(claim.attempt.id, SessionError("a", "dropped"), T0)
        put_state(store, "a", DeviceState.READY, "recovered", T0)
        add_ready(store, "b")
        (assignment,) = plan(store.snapshot(), T0)
        assert assignment.serials == ("b",)

    def test_first_phone_fault_on_each_phone_costs_no_attempt(self, store: Store) -> None:
        """App crashes on a, then b, leave a two-attempt job with both attempts; faults on phones
        it already failed on count, so it fails after four tries (twice its attempts)."""
        add_ready(store, "a", "b")
        job_id = store.enqueue(gemm_spec(attempts=2), T0)
        decisions, made = [], []
        for serial in ("a", "b", "a", "b"):
            put_state(store, serial, DeviceState.READY, "recovered", T0)
            claim = start(store, job_id, serial)
            decisions.append(store.fail_attempt(
                claim.attempt.id, SessionError(serial, "kShutdown"), T0))
            made.append(store.get_job(job_id).attempts_made)
        assert decisions == [Decision.REQUEUED] * 3 + [Decision.FAILED]
        assert made == [0, 0, 1, 2]
        assert "after 2 attempts" in store.get_job(job_id).error

    def test_timeout_retries_within_limit_after_backoff(self, store: Store) -> None:
        """A JobTimeout requeues after a backoff while attempts remain, then fails the job."""
        add_ready(store, "a")
        job_id = store.enqueue(gemm_spec(attempts=2), T0)
        claim = start(store, job_id, "a")
        assert (
            store.fail_attempt(claim.attempt.id, JobTimeout(job_id, 600), T0) is Decision.REQUEUED
        )
        assert store.get_device("a").state is DeviceState.READY
        assert plan(store.snapshot(), T0 + timedelta(seconds=29)) == []
        retry_at = T0 + timedelta(seconds=30)
        (assignment,) = plan(store.snapshot(), retry_at)
        (claim,) = store.claim([assignment], retry_at)
        assert (
            store.fail_attempt(claim.attempt.id, JobTimeout(job_id, 600), retry_at)
            is Decision.FAILED
        )
        job = store.get_job(job_id)
        assert job.state is JobState.FAILED and "after 2 attempts" in job.error

    def test_second_report_is_ignored(self, store: Store) -> None:
        """Reporting a failure for an attempt that already ended changes nothing."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(), T0), "a")
        store.finish(claim.attempt.id, OK, T0)
        assert (
            store.fail_attempt(claim.attempt.id, SessionError("a", "late"), T0) is Decision.IGNORED
        )
        assert store.get_job(claim.job.id).state is JobState.SUCCEEDED

    def test_unknown_exception_retries_within_limit(self) -> None:
        """A non-farm exception (a bug, a TVM crash) is classified as retry-within-limit."""
        failure = Failure.from_error(RuntimeError("segfault in child"))
        assert failure == Failure("RuntimeError", Retry.SAME_LIMIT, "segfault in child")
        assert Failure.from_error(SessionError("p1", "x")).serial == "p1"


class TestDeviceTransitions:
    """Device transitions are idempotent and leave an event with the reason."""

    def test_transition_writes_event_once(self, store: Store) -> None:
        """A repeated transition succeeds and writes no second event."""
        store.upsert_device("a", T0, ARM64)
        reason = "battery_temp_c 41.2 > 35"
        for expect_state in (DeviceState.DISCOVERED, DeviceState.COOLING):
            assert store.move_device("a", DeviceState.COOLING, reason, T0,
                                     expect_state=expect_state)
        events = store.device_events("a")
        assert [(e.from_state, e.to_state, e.reason) for e in events] == [
            ("discovered", "cooling", reason),
            (None, "discovered", "first seen"),
        ]

    def test_upsert_keeps_state_and_updates_facts(self, store: Store) -> None:
        """Seeing a phone again refreshes last_seen and facts but keeps its state."""
        add_ready(store, "a")
        record = store.upsert_device(
            "a", T0 + timedelta(seconds=5), {"abi": "arm64-v8a", "sdk": 33}
        )
        assert record.state is DeviceState.READY and record.facts["sdk"] == 33
        assert record.last_seen == T0 + timedelta(seconds=5)

    def test_unplugged_busy_phone_stays_offline(self, store: Store) -> None:
        """A phone that went offline mid-attempt is not made ready when the attempt ends."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(), T0), "a")
        put_state(store, "a", DeviceState.OFFLINE, "unplugged", T0)
        store.fail_attempt(claim.attempt.id, SessionError("a", "device offline"), T0)
        assert store.get_device("a").state is DeviceState.OFFLINE

    def test_release_quarantined_only_moves_a_quarantined_phone(self, store: Store) -> None:
        """release_quarantined resets a quarantined phone; any other is left, its state returned."""
        add_ready(store, "a")
        assert store.release_quarantined("a", "operator", T0) is DeviceState.READY
        assert store.get_device("a").state is DeviceState.READY
        assert store.release_quarantined("nope", "operator", T0) is None
        assert store.get_device("nope") is None
        store.set_device_health("a", DeviceHealth.BAD, "probe failed", T0)
        put_state(store, "a", DeviceState.QUARANTINED, "5 recoveries failed", T0)
        assert store.release_quarantined("a", "operator", T0) is DeviceState.QUARANTINED
        record = store.get_device("a")
        assert record.state is DeviceState.DISCOVERED and record.health is DeviceHealth.UNKNOWN

    def test_health_samples_round_trip(self, store: Store) -> None:
        """A health probe is stored and read back; unknown fields are refused."""
        store.record_health(
            "a", T0, {"battery_pct": 80.0, "battery_temp_c": 31.5, "thermal_status": 0}
        )
        (sample,) = store.health_samples("a")
        assert (
            sample["battery_temp_c"] == 31.5 and sample["screen_on"] is None and sample["at"] == T0
        )
        with pytest.raises(ValueError, match="bogus"):
            store.record_health("a", T0, {"bogus": 1})


class TestLogging:
    """Canonical log lines are written after commit, with the standard keys."""

    def test_transition_and_attempt_lines(self, store: Store) -> None:
        """A claim and a phone failure log attempt_started, device_transition and attempt_failed."""
        add_ready(store, "a", "b")
        with capture_logs() as logs:
            claim = start(store, store.enqueue(gemm_spec(), T0), "a")
            store.fail_attempt(claim.attempt.id, SessionError("a", "dropped"), T0)
        events = [(e["event"], e.get("to_state") or e.get("decision")) for e in logs]
        assert events == [
            ("device_transition", "busy"),
            ("attempt_started", None),
            ("device_transition", "unhealthy"),
            ("attempt_failed", "requeued"),
        ]
        assert logs[0]["serial"] == "a" and logs[0]["reason"].startswith(f"job {claim.job.id}")

    def test_nothing_logged_when_nothing_changed(self, store: Store) -> None:
        """An idempotent transition and a refused second finish write no log line."""
        add_ready(store, "a")
        claim = start(store, store.enqueue(gemm_spec(), T0), "a")
        store.finish(claim.attempt.id, OK, T0)
        with capture_logs() as logs:
            store.move_device("a", DeviceState.READY, "again", T0, expect_state=DeviceState.READY)
            store.finish(claim.attempt.id, OK, T0)
        assert logs == []
