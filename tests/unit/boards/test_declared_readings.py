"""Readings a kind declares: one declaration is all a new reading needs (issue 23).

The test adds ``load_5m`` to the board's declaration only, then follows a real
board capture through the probe's parser, the verdict, the store (SQLite) and
what ``farmctl devices``, the API and the dashboard show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from farm.api.listings import device_row
from farm.api.schemas import device_out
from farm.config import Settings
from farm.controllers.board import reading_from_output
from farm.health.kind_readings import ANDROID_READINGS, BOARD_READINGS, BoardRaw
from farm.health.readings import (
    UNKNOWN_READING,
    Condition,
    Declared,
    Limit,
    Reading,
    declare,
    declared,
    shown,
)
from farm.health.sample import HealthSample
from farm.health.verdict import Limits, cool_enough, verdict
from farm.queue import Store

AT = datetime(2026, 11, 26, 18, 0, tzinfo=UTC)
CAPTURE = "health__debian12_x86_64_container_no_zones.txt"  # loadavg 10.31 6.10 3.37

LOAD_5M = Reading("load_5m", "", "5-minute load average (/proc/loadavg)",
                  lambda raw: raw.load[1] if len(raw.load) > 1 else None,
                  Limit("max", Condition.COOLING, "health.reading_limits.load_5m"))


@pytest.fixture
def with_load_5m() -> Iterator[Declared[BoardRaw]]:
    """The board's declaration with one more reading, restored afterwards."""
    before = declare(BOARD_READINGS.plus(LOAD_5M))
    try:
        yield declared("board")
    finally:
        declare(before)


class TestOneDeclaration:
    def test_a_new_reading_is_read_gated_stored_and_shown(
        self, with_load_5m: Declared[BoardRaw], board_fixture: Callable[[str], bytes],
        tmp_path: Path,
    ) -> None:
        """load_5m, declared once, is parsed, holds a job back, is stored and listed with units."""
        captured = reading_from_output("board-a", AT, board_fixture(CAPTURE), registered=True)
        sample = replace(captured, app_running=True)  # the capture's server was down
        assert sample.kind == "board" and sample.value("load_5m") == pytest.approx(6.10)
        assert sample.value("load_1m") == pytest.approx(10.31)

        unset = Limits.of(Settings())  # no threshold configured: the limit is off
        assert verdict(sample, unset).condition is Condition.GOOD
        limits = Limits.of(Settings.model_validate({"health": {"reading_limits": {"load_5m": 4}}}))
        assert verdict(sample, limits).reasons == ("load_5m 6.1 > 4",)
        assert not cool_enough(sample, limits)

        with Store(f"sqlite:///{tmp_path / 'farm.db'}") as store:
            store.upsert_device("board-a", AT, {"abi": "x86_64"}, kind="board")
            store.record_health("board-a", AT, {"app_running": sample.app_running},
                                sample.readings)
            (stored,) = store.health_samples("board-a")
            record = store.get_device("board-a")
        assert stored["readings"]["load_5m"] == pytest.approx(6.10)
        assert record is not None and record.readings["load_5m"] == pytest.approx(6.10)
        row = device_row(record, {"at": AT, "readings": dict(record.readings)}, now=AT)
        assert "load_5m 6.1" in row["now"]  # it gates: the table's column shows it
        named = {v["name"]: v for v in device_out(record).values}
        assert named["load_5m"]["gates"] is True
        assert named["mem_available_mb"]["unit"] == "MiB"


class TestDeclarations:
    def test_battery_and_thermal_status_are_android_readings(self) -> None:
        """A phone's battery level and thermal status are declared readings with their limits."""
        battery = ANDROID_READINGS.get("battery_pct")
        status = ANDROID_READINGS.get("thermal_status")
        assert battery is not None and battery.unit == "%" and battery.limit is not None
        assert battery.limit.condition is Condition.UNHEALTHY
        assert status is not None and status.limit is not None
        assert status.limit.condition is Condition.COOLING

    def test_a_name_twice_is_refused(self) -> None:
        """A declaration naming one reading twice is a bug, caught when it is written."""
        with pytest.raises(ValueError, match="twice"):
            BOARD_READINGS.plus(Reading("load_1m", "", "again", lambda raw: None))

    def test_a_newer_farms_reading_is_shown_by_name(self) -> None:
        """A stored name this farm does not declare is shown, after the declared ones, unitless,
        marked unknown."""
        rows = shown("board", {"load_1m": 0.5, "fan_rpm": 1200.0})
        assert [(r["name"], r["unit"]) for r in rows] == [("load_1m", ""), ("fan_rpm", "")]
        assert [r["known"] for r in rows] == [True, False]
        assert (rows[1]["label"], rows[1]["description"]) == ("fan rpm (unknown)", UNKNOWN_READING)

    def test_a_kind_without_readings_is_judged_on_status_alone(self) -> None:
        """A proxied device declares no readings: a battery value it carried gates nothing."""
        sample = HealthSample("proxy-k", AT, kind="proxy", battery_pct=1.0)
        assert verdict(sample, Limits()).condition is Condition.GOOD
