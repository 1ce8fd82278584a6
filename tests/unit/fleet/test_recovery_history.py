"""The recovery history lives in the database: a new farmd goes on counting incidents."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from farm.clock import FakeClock, wait_until
from farm.fleet.manager import FleetManager
from farm.health.sample import HealthSample
from farm.queue import DeviceHealth, DeviceState, Store
from farm.supervise.ladder import Failure, Recovery, Step

MakeManager = Callable[..., FleetManager]
SERIAL = "R1"


def crashed(clock: FakeClock) -> HealthSample:
    """A sweep's reading of a phone whose app just crashed."""
    return HealthSample(SERIAL, clock.now(), battery_pct=80, battery_temp_c=30.0,
                        thermal_status=0, screen_on=True, app_running=False, registered=False)


class TestDurableHistory:
    def test_incidents_before_a_restart_still_count(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """Two crashes fixed by the farmd before, one after its restart: quarantined."""
        store.upsert_device(SERIAL, clock.now())
        store.move_device(SERIAL, DeviceState.READY, "test", clock.now(),
                          expect_state=DeviceState.DISCOVERED)
        before = make_manager(store, clock, quarantine_after=3)
        for _ in range(2):
            before.record(SERIAL, Failure(clock.now(), "app_running false"))
            clock.advance(5)
            before.record(SERIAL, Recovery(clock.now(), Step.RESTART_APP, True))
            clock.advance(10)  # crashed again soon after each heal: a crash loop
        after = make_manager(store, clock, quarantine_after=3)  # farmd restarted
        after.judge(SERIAL, crashed(clock))
        assert wait_until(lambda: after.state(SERIAL) is DeviceState.QUARANTINED, 10), \
            after.state(SERIAL)
        device = store.get_device(SERIAL)
        assert device is not None and device.health is DeviceHealth.BAD
        assert [type(e).__name__ for e in after.history(SERIAL)] == [
            "Failure", "Recovery", "Failure", "Recovery", "Failure", "Recovery"]

    def test_failure_during_an_open_incident_is_not_written_twice(
        self, store: Store, clock: FakeClock, make_manager: MakeManager
    ) -> None:
        """Sweeps that see the same incident again add no failure rows."""
        store.upsert_device(SERIAL, clock.now())
        store.move_device(SERIAL, DeviceState.UNHEALTHY, "test", clock.now(),
                          expect_state=DeviceState.DISCOVERED)
        manager = make_manager(store, clock)
        manager.record(SERIAL, Failure(clock.now() - timedelta(seconds=1), "app_running false"))
        manager.runtime(SERIAL).busy_task = True  # a recovery runs: the sweep only observes
        manager.judge(SERIAL, crashed(clock))
        manager.runtime(SERIAL).busy_task = False
        manager.submit = lambda serial, task: False  # type: ignore[method-assign]
        manager.judge(SERIAL, crashed(clock))
        assert len(manager.history(SERIAL)) == 1
