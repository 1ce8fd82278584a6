"""Desired and observed tracker keys: a hold asks, the fleet serves (farm.fleet.serving).

On the real store (SQLite, and PostgreSQL when ``TEST_POSTGRES_URL`` is set),
with a fleet manager without phones: the tasks reconcile starts are recorded,
not run (running one launches an app).
"""

from __future__ import annotations

from collections.abc import Callable

from farm.clock import FakeClock
from farm.errors import JobTimeout
from farm.fleet.manager import FleetManager
from farm.fleet.recovery import healable
from farm.queue import DeviceState, Outcome, Store
from farm.queue.scheduler import Assignment
from farm.tvm.keys import job_key, phone_key

MakeManager = Callable[..., FleetManager]
SERIAL = "S1"


def held_phone(store: Store, clock: FakeClock) -> int:
    """A ready phone claimed by a gemm job's attempt; the attempt's id."""
    store.upsert_device(SERIAL, clock.now(), {"abi": "arm64-v8a", "sdk": 34})
    assert store.move_device(SERIAL, DeviceState.READY, "test", clock.now(),
                             expect_state=DeviceState.DISCOVERED)
    job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, clock.now())
    [claim] = store.claim([Assignment(job_id, (SERIAL,), 60.0)], clock.now())
    return claim.attempt.id


def started_tasks(manager: FleetManager) -> list[tuple[str, str]]:
    """Record ``(serial, task name)`` of each task the manager submits, instead of running it."""
    started: list[tuple[str, str]] = []

    def submit(serial: str, task: Callable[[str], None]) -> bool:
        started.append((serial, task.__name__))
        return True

    manager.submit = submit  # type: ignore[method-assign]
    return started


class TestServeKey:
    def test_only_the_holding_attempt_sets_it_and_the_hold_end_clears_it(
        self, store: Store, clock: FakeClock
    ) -> None:
        """A compare-and-set on the hold; the key returns to the own one when the phone is freed."""
        attempt_id = held_phone(store, clock)
        key = job_key("android", 1)
        assert not store.set_serve_key(SERIAL, key, clock.now(), expect_attempt=attempt_id + 1)
        assert store.get_device(SERIAL).serve_key is None  # type: ignore[union-attr]
        assert store.set_serve_key(SERIAL, key, clock.now(), expect_attempt=attempt_id)
        assert store.get_device(SERIAL).serve_key == key  # type: ignore[union-attr]
        store.finish(attempt_id, Outcome({"gflops": 1.0}, (0.1,)), clock.now())
        freed = store.get_device(SERIAL)
        assert freed is not None and freed.state is DeviceState.READY
        assert freed.serve_key is None
        assert not store.set_serve_key(SERIAL, key, clock.now(), expect_attempt=attempt_id)


class TestReconcile:
    def test_serves_the_held_key_then_the_own_key_again(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A difference between desired and served starts a serve task; none when they agree."""
        manager = make_manager(store, clock)
        started = started_tasks(manager)
        own = phone_key(manager.options.key_prefix, SERIAL)
        attempt_id = held_phone(store, clock)
        assert manager.runtime(SERIAL).key == own
        assert manager.serving.reconcile(store.list_devices()) == []
        record = store.get_device(SERIAL)
        assert record is not None and not healable(record)  # a plain hold: its attempt's

        key = job_key(manager.options.key_prefix, 7)
        assert store.set_serve_key(SERIAL, key, clock.now(), expect_attempt=attempt_id)
        record = store.get_device(SERIAL)
        assert record is not None and healable(record)  # a crash now is the ladder's
        assert manager.serving.desired(record) == key
        assert manager.serving.reconcile(store.list_devices()) == [SERIAL]
        assert started == [(SERIAL, "serve")]

        manager.runtime(SERIAL).key = key  # what the serve task leaves when it ends
        assert manager.serving.reconcile(store.list_devices()) == []
        store.finish(attempt_id, Outcome({"gflops": 1.0}, (0.1,)), clock.now())
        assert manager.serving.reconcile(store.list_devices()) == [SERIAL]  # back to its own
        record = store.get_device(SERIAL)
        assert record is not None and manager.serving.desired(record) == own

    def test_a_device_handed_back_on_the_job_key_is_waited_for_until_served(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A tune that failed hands its phone back ready while it still serves the job key:
        the dispatcher waits (between_keys) until reconcile's serve put it on its own key."""
        manager = make_manager(store, clock)
        started = started_tasks(manager)
        own = phone_key(manager.options.key_prefix, SERIAL)
        attempt_id = held_phone(store, clock)
        assert manager.serving.between_keys(store.list_devices()) == []  # busy: not claimable
        key = job_key(manager.options.key_prefix, 7)
        assert store.set_serve_key(SERIAL, key, clock.now(), expect_attempt=attempt_id)
        manager.runtime(SERIAL).key = key  # farmd served the job key
        store.fail_attempt(attempt_id, JobTimeout(attempt_id, 60), clock.now())
        assert store.get_device(SERIAL).state is DeviceState.READY  # type: ignore[union-attr]
        assert manager.serving.between_keys(store.list_devices()) == [SERIAL]

        assert manager.serving.reconcile(store.list_devices()) == [SERIAL]
        assert started == [(SERIAL, "serve")]
        phone = manager.runtime(SERIAL)
        phone.key, phone.moving_key = own, True  # the serve task restarts it now
        assert manager.serving.between_keys(store.list_devices()) == [SERIAL]
        phone.moving_key = False  # registered under its own key
        assert manager.serving.between_keys(store.list_devices()) == []

    def test_a_device_gone_offline_counts_for_no_job_key(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """Unplugged mid-tune, it serves nothing: its job's other devices do not wait for it."""
        manager = make_manager(store, clock)
        attempt_id = held_phone(store, clock)
        key = job_key(manager.options.key_prefix, 7)
        assert store.set_serve_key(SERIAL, key, clock.now(), expect_attempt=attempt_id)
        manager.runtime(SERIAL).key = key
        assert manager.serving.sharing(key) == 1
        manager.on_device_state(SERIAL, "offline", "android")
        assert manager.serving.sharing(key) == 0
