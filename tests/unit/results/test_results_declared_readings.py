"""A reading declared once reaches results rows, the report and metrics with no other edit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from rich.console import Console

from farm.health import HealthSample
from farm.health.kind_readings import ANDROID_READINGS
from farm.health.readings import Reading, declare
from farm.metrics import FarmMetrics
from farm.queue.models import JobState
from farm.queue.records import JobView, ResultView, SnapshotData
from farm.results.report import results_table, rows_from
from farm.results.rows import rows_of, sample_fields
from farm.results.spreads import phone_spreads
from farm.runner.gating import snapshot_of

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

FAN = Reading("fan_rpm", "rpm", "fan speed (a test kind's)", lambda raw: None, label="fan",
              with_results=True, series="farm_phone_fan_rpm")


@pytest.fixture
def fan_declared() -> Iterator[None]:
    """Android's readings plus ``fan_rpm``, kept with results and with a series of its own."""
    before = declare(ANDROID_READINGS.plus(FAN))
    yield
    declare(before)


def _job() -> JobView:
    spec = {"kind": "gemm", "params": {"n": 64, "dtype": "float32"},
            "devices": {"serials": ["A"]}}
    return JobView(1, "gemm", spec, JobState.SUCCEEDED, 0, NOW, None, 3, 1, 600.0, (), None, NOW,
                   None)


def _snapshot(fan_rpm: float) -> SnapshotData:
    """The state the thermal gate keeps before a run, from a sample that read the fan."""
    sample = HealthSample("A", NOW, battery_temp_c=30.0, thermal_status=0, fan_rpm=fan_rpm)
    return replace(snapshot_of(sample, {}, 0.0), attempt_id=7)


@pytest.mark.usefixtures("fan_declared")
class TestANewReading:
    def test_results_rows_carry_it_as_a_column(self) -> None:
        """Each sample row has the reading taken before its run; the flat CSV/JSON a column."""
        result = ResultView(1, 1, 7, {"runs": [{"serial": "A"}] * 2}, NOW, (1.0, 1.1), "s",
                            ("A", "A"), (0, 0))
        rows = rows_of(_job(), result, [_snapshot(900.0), _snapshot(1500.0)])
        assert [r.readings["fan_rpm"] for r in rows] == [900.0, 1500.0]
        assert "fan_rpm" in sample_fields() and rows[0].flat()["fan_rpm"] == 900.0
        [figure] = phone_spreads(rows, max_cv=0.5)
        assert figure.readings["fan_rpm"] == 1500.0

    def test_the_report_shows_it(self) -> None:
        """The report's row holds the reading and its table a column with label and unit."""
        result = ResultView(1, 1, 7, {"runs": [{"serial": "A", "mean_s": 0.01}]}, NOW, (0.01,),
                            "s")
        [row] = rows_from(_job(), [result], [_snapshot(1200.0)])
        assert row.readings["fan_rpm"] == 1200.0
        console = Console(width=250, record=True)
        console.print(results_table([row]))
        text = console.export_text()
        assert "fan rpm" in text and "1200.0" in text

    def test_metrics_publish_it(self) -> None:
        """A health sample's value lands in farm_device_reading and in the reading's own series."""
        metrics = FarmMetrics()
        metrics.observe_health(HealthSample("A", NOW, fan_rpm=900.0))
        registry = metrics.registry
        assert registry.get_sample_value("farm_phone_fan_rpm", {"serial": "A"}) == 900.0
        assert registry.get_sample_value(
            "farm_device_reading", {"serial": "A", "kind": "android", "name": "fan_rpm"}) == 900.0


def test_without_the_declaration_it_is_not_a_column() -> None:
    """The column comes from the declaration alone: undeclared, the name is no results column."""
    assert "fan_rpm" not in sample_fields()
    assert "battery_temp_c" in sample_fields()
