"""What the app watch does with an app death, on the real store (no phones).

SQLite, and PostgreSQL when ``TEST_POSTGRES_URL`` is set.
"""

from __future__ import annotations

from collections.abc import Callable

from test_manager_races import Racer, ready_phone

from farm.clock import FakeClock
from farm.device.eventlog import AppDeath
from farm.fleet.manager import FleetManager
from farm.queue import DeviceState, Store
from farm.supervise.ladder import Failure

MakeManager = Callable[..., FleetManager]
PKG = "org.apache.tvm.tvmrpc"
CRASH = AppDeath("am_crash", "11-24 02:30:00.123", 4242, PKG, "java.lang.IllegalStateException")
DIED = AppDeath("am_proc_died", "11-24 02:30:00.125", 4242, PKG)


def capture_submits(manager: FleetManager) -> list[str]:
    """Replace the manager's task start with a list of the tasks' names."""
    started: list[str] = []

    def submit(serial: str, task: Callable[[str], None]) -> bool:
        started.append(f"{task.__name__}:{serial}")
        return True

    manager.submit = submit  # type: ignore[method-assign]
    return started


class TestOnDeath:
    def test_ready_phone_goes_unhealthy_and_recovers_now(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A death on a ready phone records the failure with the event, takes the phone out of
        ready and starts the ladder's step at once."""
        manager = make_manager(store, clock)
        started = capture_submits(manager)
        serial = ready_phone(store, clock)
        manager.app_watch.on_death(serial, CRASH)
        device = store.get_device(serial)
        assert device is not None and device.state is DeviceState.UNHEALTHY
        assert manager.history(serial) == [Failure(clock.now(), CRASH.reason)]
        reasons = [e.reason for e in store.device_events(serial)]
        assert f"app died: {CRASH.reason}" in reasons, reasons
        assert started == [f"recover_unlisted:{serial}"]

    def test_second_event_of_one_death_is_the_same_incident(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """am_proc_died after am_crash of the same process records no second failure."""
        manager = make_manager(store, clock)
        capture_submits(manager)
        serial = ready_phone(store, clock)
        crashed_at = clock.now()
        manager.app_watch.on_death(serial, CRASH)
        clock.advance(0.01)
        manager.app_watch.on_death(serial, DIED)
        assert manager.history(serial) == [Failure(crashed_at, CRASH.reason)]

    def test_busy_phone_is_left_alone(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A death during a job moves nothing and starts nothing: the attempt fails by itself."""
        manager = make_manager(store, clock)
        started = capture_submits(manager)
        racer = Racer(store, clock, ready_phone(store, clock))
        [attempt_id] = [racer.claim()]
        manager.app_watch.on_death(racer.serial, CRASH)
        device = store.get_device(racer.serial)
        assert device is not None
        assert (device.state, device.attempt_id) == (DeviceState.BUSY, attempt_id)
        assert manager.history(racer.serial) == []
        assert started == []

    def test_claim_between_read_and_write_wins(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A claim made after the death was read is not overwritten by the move to unhealthy."""
        manager = make_manager(store, clock)
        capture_submits(manager)
        racer = Racer(store, clock, ready_phone(store, clock))
        claimed = racer.race_once(manager, racer.claim)
        manager.app_watch.on_death(racer.serial, CRASH)
        [attempt_id] = claimed
        racer.check()
        assert racer.running() == [attempt_id]

    def test_java_crash_is_counted_for_the_sweep(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """A handled Java crash raises the FATAL EXCEPTION count the sweep compares with."""
        manager = make_manager(store, clock)
        capture_submits(manager)
        serial = ready_phone(store, clock)
        manager.runtime(serial).crashes_seen = 2
        manager.app_watch.on_death(serial, CRASH)
        manager.app_watch.on_death(serial, DIED)
        assert manager.runtime(serial).crashes_seen == 3
