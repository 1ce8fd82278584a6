"""Thermal gating against scripted health samples and a fake clock."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

from farm.clock import FakeClock
from farm.errors import PhoneFault
from farm.health.sample import HealthSample
from farm.health.verdict import Limits
from farm.runner.gating import gate_limits, wait_until_cool

SERIAL = "R58M123"


def readings(
    clock: FakeClock, temps_c: list[float], status: list[int] | None = None
) -> Callable[[], HealthSample]:
    """A reader returning one sample per call from the given temperatures (the last repeats)."""
    status = status or [0] * len(temps_c)
    pairs: Iterator[tuple[float, int]] = iter(zip(temps_c, status, strict=True))
    last: list[tuple[float, int]] = []

    def read() -> HealthSample:
        with contextlib.suppress(StopIteration):  # the last reading repeats
            last[:] = [next(pairs)]
        temp_c, thermal = last[0]
        return HealthSample(serial=SERIAL, at=clock.now(), battery_temp_c=temp_c,
                            thermal_status=thermal, battery_pct=80, plugged=True)

    return read


class TestWaitUntilCool:
    def test_cool_phone_passes_at_once(self) -> None:
        """A phone at the threshold passes with no wait recorded."""
        clock = FakeClock()
        snap = wait_until_cool(
            readings(clock, [35.0]), Limits(), clock, deadline_s=60, sleep=clock.advance
        )
        assert snap.thermal_wait_s == 0
        assert snap.battery["battery_temp_c"] == 35.0
        assert snap.serial == SERIAL

    def test_hot_phone_waits_and_records_the_wait(self) -> None:
        """A phone above the threshold is polled until it cools; the wait is recorded."""
        clock = FakeClock()
        snap = wait_until_cool(
            readings(clock, [41.0, 38.0, 34.0]),
            Limits(),
            clock,
            deadline_s=600,
            poll_s=5,
            sleep=clock.advance,
            facts={"abi": "x86_64"},
        )
        assert snap.thermal_wait_s == 10
        assert snap.facts == {"abi": "x86_64"}
        assert snap.thermal["thermal_status"] == 0

    def test_thermal_status_blocks_even_when_battery_is_cool(self) -> None:
        """A nonzero thermal status holds the run back although the battery is cool."""
        clock = FakeClock()
        snap = wait_until_cool(readings(clock, [30.0, 30.0], status=[2, 0]), Limits(), clock,
                               deadline_s=600, poll_s=7, sleep=clock.advance)
        assert snap.thermal_wait_s == 7

    def test_phone_that_stays_hot_is_a_phone_fault(self) -> None:
        """Past the deadline the gate raises PhoneFault naming the phone and the reason."""
        clock = FakeClock()
        with pytest.raises(PhoneFault) as info:
            wait_until_cool(readings(clock, [44.0]), Limits(), clock, deadline_s=30, poll_s=10,
                            sleep=clock.advance)
        assert info.value.serial == SERIAL
        assert "battery_temp_c 44 > 35" in str(info.value)
        assert clock.monotonic() == 1030.0

    def test_gate_ignores_hysteresis_margin(self) -> None:
        """The gate applies the threshold itself, not threshold minus the cooling margin."""
        assert gate_limits(Limits(cool_margin_c=2.0)).cool_margin_c == 0.0


class TestControllerGate:
    """The attempt's gate reads each device through its kind's controller."""

    def test_gate_reads_the_devices_kind(self, tmp_path: Path) -> None:
        """A device of a registered kind is gated on that controller's readings, and waits."""
        from farm.config import Settings
        from farm.controllers import ThermalReading, register, unregister
        from farm.runner.gating import ControllerGate

        clock = FakeClock()
        temps_c = iter([70.0, 60.0, 50.0])
        asked: list[str] = []

        class ZoneOnly:
            kind = "zoneonly"

            def gating_reading(self, serial: str, at: datetime) -> ThermalReading:
                asked.append(serial)
                return HealthSample(serial=serial, at=at, max_zone_temp_c=next(temps_c))

        register("zoneonly", lambda context: ZoneOnly())  # type: ignore[arg-type, return-value]
        try:
            settings = Settings.model_validate({"data_dir": str(tmp_path)})
            gate = ControllerGate(settings, Limits(zone_temp_max_c=55.0), clock,
                                  {"b1": {"model": "board"}}, {"b1": "zoneonly"},
                                  sleep=clock.advance)
            snap = gate("b1")
        finally:
            unregister("zoneonly")
        assert asked == ["b1"] * 3
        assert snap.thermal["max_zone_temp_c"] == 50.0 and snap.thermal_wait_s > 0
        assert snap.battery.get("battery_pct") is None  # a board has no battery
        assert snap.facts == {"model": "board"}
