"""Fleet writes raced against claims on the real store: a claim is never overwritten.

The racing writer runs exactly between the fleet's read of a phone and its
write (the store's ``get_device`` is wrapped to run it right after returning
the record), which is the interleaving that double-booked a phone when the
fleet wrote states unconditionally. SQLite, and PostgreSQL when
``TEST_POSTGRES_URL`` is set.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from farm.clock import FakeClock
from farm.errors import PhoneFault
from farm.fleet.lifecycle import Move
from farm.fleet.manager import FleetManager
from farm.health.sample import HealthSample
from farm.queue import AttemptState, DeviceHealth, DeviceState, Outcome, Store
from farm.queue.records import DeviceRecord
from farm.queue.scheduler import Assignment

MakeManager = Callable[..., FleetManager]
_serials = (f"R{n}" for n in itertools.count())


def sample(serial: str, clock: FakeClock, **changes: Any) -> HealthSample:
    """A healthy reading of the phone, with ``changes``."""
    fields: dict[str, Any] = {"battery_pct": 80, "battery_temp_c": 30.0, "thermal_status": 0,
                              "screen_on": True, "app_running": True, "registered": True}
    return HealthSample(serial, clock.now(), **{**fields, **changes})


def ready_phone(store: Store, clock: FakeClock) -> str:
    """A new phone, provisioned and ready; its serial."""
    serial = next(_serials)
    store.upsert_device(serial, clock.now(), {"abi": "arm64-v8a", "sdk": 34})
    assert store.move_device(serial, DeviceState.READY, "test", clock.now(),
                             expect_state=DeviceState.DISCOVERED)
    return serial


class Racer:
    """Claims and releases one phone, and knows which attempts ran on it."""

    def __init__(self, store: Store, clock: FakeClock, serial: str) -> None:
        self.store, self.clock, self.serial = store, clock, serial
        self.jobs: list[int] = []

    def claim(self) -> int | None:
        """Enqueue a gemm job and claim the phone for it; the attempt id, or None."""
        job_id = self.store.enqueue({"kind": "gemm", "params": {"n": 64}}, self.clock.now())
        self.jobs.append(job_id)
        claims = self.store.claim([Assignment(job_id, (self.serial,), 60.0)], self.clock.now())
        return claims[0].attempt.id if claims else None

    def finish(self) -> None:
        """End every running attempt on the phone with a result (frees it)."""
        for attempt_id in self.running():
            self.store.finish(attempt_id, Outcome({"gflops": 1.0}, (0.1,)), self.clock.now())

    def running(self) -> list[int]:
        """Ids of the running attempts that hold the phone."""
        return [a.id for j in self.jobs for a in self.store.attempts(j)
                if a.state is AttemptState.RUNNING and self.serial in a.serials]

    def race_once(self, manager: FleetManager, act: Callable[[], object]) -> list[object]:
        """Run ``act`` right after the fleet's next read of the phone; returns its result."""
        read = self.store.get_device
        done: list[object] = []

        def get_device(serial: str) -> DeviceRecord | None:
            record = read(serial)
            if not done:
                done.append(act())
            return record

        manager.store.get_device = get_device  # type: ignore[method-assign]
        return done

    def check(self) -> None:
        """The phone is busy exactly while one attempt runs on it, with that attempt's id."""
        del self.store.get_device  # back to the class's method
        device = self.store.get_device(self.serial)
        running = self.running()
        assert device is not None and len(running) <= 1, running
        if running:
            assert (device.state, device.attempt_id) == (DeviceState.BUSY, running[0])
        else:
            assert device.state is not DeviceState.BUSY


def failing_launch(serial: str) -> None:
    """A launch whose app never registers."""
    raise PhoneFault(serial, "app did not register")


class TestClaimBetweenReadAndWrite:
    @pytest.mark.parametrize("reading", [{"battery_temp_c": 45.0}, {"battery_pct": 5}])
    def test_verdict_does_not_overwrite_a_claim(
        self, store: Store, clock: FakeClock, make_manager: MakeManager, reading: dict[str, Any]
    ) -> None:
        """A verdict (cooling, unhealthy) read on a ready phone is dropped once a claim made it
        busy, and the busy phone's health is not judged."""
        manager = make_manager(store, clock)
        racer = Racer(store, clock, ready_phone(store, clock))
        claimed = racer.race_once(manager, racer.claim)
        manager.judge(racer.serial, sample(racer.serial, clock, **reading))
        [attempt_id] = claimed
        racer.check()
        device = store.get_device(racer.serial)
        assert device is not None and device.attempt_id == attempt_id
        assert device.health is DeviceHealth.UNKNOWN

    def test_quarantine_does_not_overwrite_a_claim(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A ladder that decided on quarantine leaves a phone claimed since alone."""
        manager = make_manager(store, clock)
        racer = Racer(store, clock, ready_phone(store, clock))
        claimed = racer.race_once(manager, racer.claim)
        manager.recoverer._quarantine(racer.serial, 5)
        [attempt_id] = claimed
        racer.check()
        assert racer.running() == [attempt_id]
        assert manager.history(racer.serial) == []  # no quarantine recorded either

    def test_failed_serve_does_not_overwrite_a_claim(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A failed serve for a new tracker does not mark unhealthy a phone claimed meanwhile."""
        manager = make_manager(store, clock)
        manager.android.serve = lambda serial, key: failing_launch(serial)  # type: ignore[method-assign]
        racer = Racer(store, clock, ready_phone(store, clock))
        manager.tracker_generation += 1  # its server registered with a tracker that died
        claimed = racer.race_once(manager, racer.claim)
        manager.serving.serve(racer.serial)
        [attempt_id] = claimed
        racer.check()
        assert racer.running() == [attempt_id]

    def test_lost_race_is_judged_again(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A phone another writer moved between read and write is judged on the fresh state."""
        manager = make_manager(store, clock)
        racer = Racer(store, clock, ready_phone(store, clock))
        racer.race_once(manager, lambda: store.move_device(
            racer.serial, DeviceState.UNHEALTHY, "racer", clock.now(),
            expect_state=DeviceState.READY))
        seen: list[DeviceState] = []

        def decide(record: DeviceRecord) -> Move | None:
            seen.append(record.state)
            if record.state is DeviceState.UNHEALTHY:
                return None
            return Move(DeviceState.COOLING, "hot")

        record, move = manager.settle(racer.serial, decide)
        assert seen == [DeviceState.READY, DeviceState.UNHEALTHY]
        assert move is None and record is not None and record.state is DeviceState.UNHEALTHY


_DECISIONS = ["hot", "cool", "low_battery", "quarantine", "serve_failed"]
_READINGS: dict[str, dict[str, Any]] = {
    "hot": {"battery_temp_c": 45.0}, "cool": {}, "low_battery": {"battery_pct": 5}}


class TestInterleavings:
    @settings(max_examples=30, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops=st.lists(st.tuples(st.sampled_from(_DECISIONS),
                                  st.sampled_from(["claim", "finish", "none"])),
                        min_size=1, max_size=8))
    def test_never_two_running_attempts_or_a_lost_claim(
        self, store: Store, make_manager: MakeManager, ops: list[tuple[str, str]]
    ) -> None:
        """Whatever fleet decision meets whatever racing claim or release, a phone is busy
        exactly while one attempt runs on it, with that attempt's id."""
        clock = FakeClock()
        manager = make_manager(store, clock)
        manager.android.serve = lambda serial, key: failing_launch(serial)  # type: ignore[method-assign]
        racer = Racer(store, clock, ready_phone(store, clock))
        acts: dict[str, Callable[[], object]] = {
            "claim": racer.claim, "finish": racer.finish, "none": lambda: None}
        for decision, act in ops:
            clock.advance(1)
            racer.race_once(manager, acts[act])
            if decision == "quarantine":
                manager.recoverer._quarantine(racer.serial, 5)
            elif decision == "serve_failed":
                manager.tracker_generation += 1  # a tracker restart made its server stale
                manager.serving.serve(racer.serial)
            else:
                manager.judge(racer.serial, sample(racer.serial, clock, **_READINGS[decision]))
            racer.check()
