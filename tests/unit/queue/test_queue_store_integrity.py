"""Integrity of the store: phone holds, cancel, reclaim, device compare-and-set, health reasons.

Each test runs on SQLite, and on PostgreSQL when ``TEST_POSTGRES_URL`` is set,
and ends by reading the tables for the queue's rules (:mod:`queue_integrity`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa
from queue_helpers import T0, add_ready, gemm_spec, write_ready_unchecked
from queue_integrity import Checker
from structlog.testing import capture_logs

from farm.errors import SessionError
from farm.queue import (
    Assignment,
    AttemptState,
    Claim,
    Decision,
    DeviceHealth,
    DeviceState,
    JobState,
    Outcome,
    Store,
)
from farm.queue.db import create_engine

OK = Outcome(summary={"median_s": 0.002}, samples=[0.002])
LATER = T0 + timedelta(seconds=61)  # past a 60 s lease claimed at T0


@pytest.fixture
def checked(store_url: str) -> Iterator[Store]:
    """A store whose tables must keep the queue's rules when the test ends."""
    checker = Checker(store_url)
    try:
        with Store(store_url) as store:
            yield store
        assert checker.violations() == []
    finally:
        checker.close()


@pytest.fixture
def raw(store_url: str) -> Iterator[sa.Engine]:
    """An engine on the test's database, for writes the store refuses to make."""
    engine = create_engine(store_url)
    yield engine
    engine.dispose()


def start(store: Store, job_id: int, *serials: str, host: str | None = None) -> Claim:
    """Claim one job on the given phones at T0 with a 60 s lease."""
    (claim,) = store.claim([Assignment(job_id, serials, 60.0)], T0, host=host)
    return claim


def busy_with(store: Store, serial: str) -> int | None:
    """The attempt a phone is busy with; None if it is not busy."""
    device = store.get_device(serial)
    assert device is not None
    return device.attempt_id if device.state is DeviceState.BUSY else None


class TestPhoneHolds:
    """The database refuses a second running attempt on one phone, whatever its state says."""

    def test_unconditional_write_cannot_double_book(self, checked: Store, raw: sa.Engine) -> None:
        """A ready written over a busy phone (the old fleet race) lets no second job claim it."""
        add_ready(checked, "a")
        first = start(checked, checked.enqueue(gemm_spec(), T0), "a")
        write_ready_unchecked(raw, "a", T0)  # the old fleet race, in plain SQL
        assert busy_with(checked, "a") is None  # the write took: only the hold is left
        second = checked.enqueue(gemm_spec(), T0)
        assert checked.claim([Assignment(second, ("a",), 60.0)], T0) == []
        assert checked.get_job(second).state is JobState.QUEUED
        assert checked.get_job(second).attempts_made == 0
        assert checked.finish(first.attempt.id, OK, T0) is True
        assert start(checked, second, "a").job.id == second

    def test_refused_assignment_leaves_the_others(self, checked: Store, raw: sa.Engine) -> None:
        """An assignment refused by a hold is rolled back alone; the same claim starts the rest."""
        add_ready(checked, "a", "b")
        start(checked, checked.enqueue(gemm_spec(), T0), "a")
        write_ready_unchecked(raw, "a", T0)  # the old fleet race, in plain SQL
        held, free = checked.enqueue(gemm_spec(), T0), checked.enqueue(gemm_spec(), T0)
        with capture_logs() as logs:
            claims = checked.claim(
                [Assignment(held, ("b", "a"), 60.0), Assignment(free, ("b",), 60.0)], T0
            )
        assert [c.job.id for c in claims] == [free]
        assert busy_with(checked, "b") == claims[0].attempt.id
        assert checked.attempts(held) == []
        assert [e["event"] for e in logs if e["event"] == "claim_refused"] == ["claim_refused"]
        assert not any(e.get("job_id") == held and e["event"] == "attempt_started" for e in logs)

    def test_unplugged_phone_stays_held_until_its_attempt_ends(self, checked: Store) -> None:
        """A busy phone moved offline and back to ready is not claimed before its attempt ends."""
        add_ready(checked, "a")
        first = start(checked, checked.enqueue(gemm_spec(), T0), "a")
        assert checked.move_device("a", DeviceState.OFFLINE, "unplugged", T0,
                                   expect_state=DeviceState.BUSY, expect_attempt=first.attempt.id)
        assert checked.move_device("a", DeviceState.READY, "back", T0,
                                   expect_state=DeviceState.OFFLINE)
        second = checked.enqueue(gemm_spec(), T0)
        assert checked.claim([Assignment(second, ("a",), 60.0)], T0) == []
        error = SessionError("a", "device offline")
        assert checked.fail_attempt(first.attempt.id, error, T0) is Decision.REQUEUED
        assert checked.get_device("a").state is DeviceState.READY  # not busy: left as it was
        assert start(checked, second, "a").job.id == second

    @pytest.mark.parametrize("ending", ["finish", "fail", "reap", "requeue"])
    def test_every_ending_frees_the_phone(self, checked: Store, ending: str) -> None:
        """Finish, fail, reap and requeue each release the hold: the phone can be claimed again."""
        add_ready(checked, "a")
        claim = start(checked, checked.enqueue(gemm_spec(), T0), "a")
        if ending == "finish":
            checked.finish(claim.attempt.id, OK, T0)
        elif ending == "fail":
            checked.fail_attempt(claim.attempt.id, SessionError("a", "dropped"), T0)
        elif ending == "reap":
            checked.reap(LATER)
        else:
            checked.requeue(claim.attempt.id, "farmd stopping", T0)
        checked.move_device("a", DeviceState.READY, "checked", T0,
                            expect_state=checked.get_device("a").state)
        other = checked.enqueue(gemm_spec(), T0)
        assert checked.claim([Assignment(other, ("a",), 60.0)], LATER) != []


class TestMoveDevice:
    """move_device is a compare-and-set on the state and attempt the caller read."""

    def test_stale_read_loses(self, checked: Store) -> None:
        """A move planned on a ready read does nothing once a claim made the phone busy."""
        add_ready(checked, "a")
        read = checked.get_device("a")
        claim = start(checked, checked.enqueue(gemm_spec(), T0), "a")
        with capture_logs() as logs:
            moved = checked.move_device("a", DeviceState.UNHEALTHY, "probe failed", T0,
                                        expect_state=read.state, expect_attempt=read.attempt_id)
        assert moved is False
        assert busy_with(checked, "a") == claim.attempt.id
        assert logs[0]["event"] == "device_move_lost" and logs[0]["found_state"] == "busy"

    def test_wrong_attempt_loses(self, checked: Store) -> None:
        """A busy phone moves only when the caller names the attempt it is busy with."""
        add_ready(checked, "a")
        claim = start(checked, checked.enqueue(gemm_spec(), T0), "a")
        assert not checked.move_device("a", DeviceState.OFFLINE, "gone", T0,
                                       expect_state=DeviceState.BUSY)
        assert checked.move_device("a", DeviceState.OFFLINE, "gone", T0,
                                   expect_state=DeviceState.BUSY, expect_attempt=claim.attempt.id)

    def test_only_a_claim_makes_a_phone_busy(self, checked: Store) -> None:
        """Moving a phone to busy is refused: a busy phone without a hold would break the rule."""
        add_ready(checked, "a")
        with pytest.raises(ValueError, match="only a claim"):
            checked.move_device("a", DeviceState.BUSY, "x", T0, expect_state=DeviceState.READY)
        assert checked.move_device("nope", DeviceState.READY, "x", T0,
                                   expect_state=DeviceState.DISCOVERED) is False


class TestCancel:
    """A cancel ends the attempt's record now; its phones wait for the executor or the lease."""

    def test_cancel_ends_the_attempt_record(self, checked: Store, raw: sa.Engine) -> None:
        """The attempt is cancelled with its end time; the phone stays busy and held meanwhile."""
        add_ready(checked, "a")
        claim = start(checked, checked.enqueue(gemm_spec(), T0), "a")
        at = T0 + timedelta(seconds=5)
        assert checked.cancel(claim.job.id, at) is True
        (attempt,) = checked.attempts(claim.job.id)
        assert (attempt.state, attempt.finished_at, attempt.error_kind) == (
            AttemptState.CANCELLED, at, "Cancelled")
        assert busy_with(checked, "a") == claim.attempt.id
        other = checked.enqueue(gemm_spec(), T0)
        write_ready_unchecked(raw, "a", T0)  # the old fleet race, in plain SQL
        assert checked.claim([Assignment(other, ("a",), 60.0)], at) == []

    def test_live_farmd_frees_the_phone_when_its_child_stopped(self, checked: Store) -> None:
        """The heartbeat says stop; the executor's report frees the phone to ready."""
        add_ready(checked, "a")
        claim = start(checked, checked.enqueue(gemm_spec(), T0), "a")
        checked.cancel(claim.job.id, T0)
        assert checked.heartbeat(claim.attempt.id, T0) is False
        stopped = SessionError("a", "killed")
        assert checked.fail_attempt(claim.attempt.id, stopped, T0) is Decision.CANCELLED
        assert checked.get_device("a").state is DeviceState.READY
        assert checked.fail_attempt(claim.attempt.id, stopped, T0) is Decision.IGNORED
        assert checked.get_job(claim.job.id).state is JobState.CANCELLED

    def test_late_result_frees_the_phone(self, checked: Store) -> None:
        """A result reported after the cancel is dropped but frees the phone."""
        add_ready(checked, "a")
        claim = start(checked, checked.enqueue(gemm_spec(), T0), "a")
        checked.cancel(claim.job.id, T0)
        assert checked.finish(claim.attempt.id, OK, T0) is False
        assert checked.count_results(claim.job.id) == 0
        assert checked.get_device("a").state is DeviceState.READY

    def test_dead_farmd_phone_freed_when_lease_runs_out(self, checked: Store) -> None:
        """With no report, reap frees the phone (unhealthy) once the lease ran out, not before."""
        add_ready(checked, "a")
        claim = start(checked, checked.enqueue(gemm_spec(), T0), "a")
        checked.cancel(claim.job.id, T0)
        assert checked.reap(T0 + timedelta(seconds=59)) == []
        assert busy_with(checked, "a") == claim.attempt.id
        assert checked.reap(LATER) == []  # nothing abandoned: the attempt was cancelled
        assert checked.get_device("a").state is DeviceState.UNHEALTHY
        assert checked.attempts(claim.job.id)[0].state is AttemptState.CANCELLED

    def test_dead_farmd_phone_freed_by_reclaim(self, checked: Store) -> None:
        """A farmd restarting on the attempt's host frees the phone at once (unhealthy)."""
        add_ready(checked, "a")
        claim = start(checked, checked.enqueue(gemm_spec(), T0), "a", host="h1")
        checked.cancel(claim.job.id, T0)
        assert checked.reclaim("h2", "farmd started", T0) == []
        assert busy_with(checked, "a") == claim.attempt.id
        assert checked.reclaim("h1", "farmd started", T0) == []
        assert checked.get_device("a").state is DeviceState.UNHEALTHY

    def test_queued_job_cancel(self, checked: Store) -> None:
        """A queued job is cancelled once; an unknown id is refused."""
        job_id = checked.enqueue(gemm_spec(), T0)
        assert checked.cancel(job_id, T0) is True
        assert checked.cancel(job_id, T0) is False
        assert checked.cancel(job_id + 1, T0) is False


class TestReclaim:
    """A farmd starting on a host ends its dead predecessor's attempts at once."""

    def test_reclaim_requeues_without_charging_a_try(self, checked: Store) -> None:
        """The host's running attempt is abandoned, its job queued with its one try intact."""
        add_ready(checked, "a", "b")
        job_id = checked.enqueue(gemm_spec(attempts=1), T0)
        claim = start(checked, job_id, "a", host="h1")
        assert claim.attempt.host == "h1"
        (reclaimed,) = checked.reclaim("h1", "farmd restarted", T0 + timedelta(seconds=1))
        assert reclaimed.id == claim.attempt.id
        assert (reclaimed.state, reclaimed.error_kind, reclaimed.error) == (
            AttemptState.ABANDONED, "Reclaimed", "farmd restarted")
        job = checked.get_job(job_id)
        assert (job.state, job.attempts_made, job.retry_at) == (JobState.QUEUED, 0, None)
        assert checked.get_device("a").state is DeviceState.UNHEALTHY
        assert start(checked, job_id, "b", host="h1").job.attempts_made == 1
        assert checked.heartbeat(claim.attempt.id, T0) is False

    def test_other_hosts_are_left_alone(self, checked: Store) -> None:
        """Attempts of another host, or of none, keep running."""
        add_ready(checked, "a", "b")
        theirs = start(checked, checked.enqueue(gemm_spec(), T0), "a", host="h2")
        unnamed = start(checked, checked.enqueue(gemm_spec(), T0), "b")
        assert checked.reclaim("h1", "farmd restarted", T0) == []
        assert busy_with(checked, "a") == theirs.attempt.id
        assert busy_with(checked, "b") == unnamed.attempt.id
        assert checked.heartbeat(theirs.attempt.id, T0) is True

    def test_offline_phone_loses_its_hold(self, checked: Store) -> None:
        """A phone forgotten as offline before reclaim keeps its state and loses its hold."""
        add_ready(checked, "a")
        claim = start(checked, checked.enqueue(gemm_spec(), T0), "a", host="h1")
        checked.move_device("a", DeviceState.OFFLINE, "farmd started", T0,
                            expect_state=DeviceState.BUSY, expect_attempt=claim.attempt.id)
        assert len(checked.reclaim("h1", "farmd restarted", T0)) == 1
        assert checked.get_device("a").state is DeviceState.OFFLINE
        checked.move_device("a", DeviceState.READY, "provisioned", T0,
                            expect_state=DeviceState.OFFLINE)
        assert start(checked, claim.job.id, "a").job.id == claim.job.id


class TestHealthAxis:
    """Health carries its reason; device reads carry the latest health sample."""

    def test_health_reason_is_stored(self, checked: Store) -> None:
        """A health change stores its reason; a new reason for the same health replaces it."""
        add_ready(checked, "a")
        assert checked.set_device_health("a", DeviceHealth.BAD, "app not running", T0) == [
            "health", "health_reason"]
        assert checked.set_device_health("a", DeviceHealth.BAD, "too hot", T0) == [
            "health_reason"]
        assert checked.set_device_health("a", DeviceHealth.BAD, "too hot", T0) == []
        device = checked.get_device("a")
        assert (device.health, device.health_reason) == (DeviceHealth.BAD, "too hot")
        reasons = [e.reason for e in checked.device_events("a")]
        assert reasons.count("health unknown -> bad (app not running)") == 1
        assert not any("too hot" in r for r in reasons)

    def test_devices_carry_their_latest_sample(self, checked: Store) -> None:
        """list_devices and get_device give each phone's newest battery and thermal figures."""
        add_ready(checked, "a", "b", "c")
        later = T0 + timedelta(seconds=30)
        checked.record_health("a", later, {"battery_pct": 80.0, "battery_temp_c": 33.5,
                                           "thermal_status": 1})
        checked.record_health("a", T0, {"battery_pct": 90.0, "battery_temp_c": 30.0})
        checked.record_health("b", T0, {"battery_pct": 50.0})
        a, b, c = checked.list_devices()
        assert (dict(a.readings), a.sampled_at) == (
            {"battery_pct": 80.0, "battery_temp_c": 33.5, "thermal_status": 1}, later)
        assert (dict(b.readings), b.sampled_at) == ({"battery_pct": 50.0}, T0)
        assert (c.serial, dict(c.readings), c.sampled_at) == ("c", {}, None)
        assert checked.get_device("a") == a
