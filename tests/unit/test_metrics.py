"""farm.metrics: the documented series, scraped over HTTP from a loopback endpoint."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from prometheus_client.parser import text_string_to_metric_families

from farm.errors import ConfigError, InfraFault
from farm.health import HealthSample
from farm.metrics import FarmMetrics, MetricsServer, start_metrics_server
from farm.supervise import Step

AT = datetime(2025, 6, 1, tzinfo=UTC)


@pytest.fixture
def metrics() -> FarmMetrics:
    """Fresh collectors on their own registry."""
    return FarmMetrics()


@pytest.fixture
def server(metrics: FarmMetrics) -> Iterator[MetricsServer]:
    """The endpoint on a free loopback port, stopped after the test."""
    running = start_metrics_server(metrics, "127.0.0.1", 0)
    yield running
    running.stop()


def scrape(server: MetricsServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics and return {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(server.url, timeout=5) as response:  # noqa: S310 - http://127.0.0.1
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


class TestFarmMetrics:
    def test_up_is_one(self, server: MetricsServer) -> None:
        """farm_up reads 1 as soon as the collectors exist."""
        assert scrape(server)[("farm_up", ())] == 1.0

    def test_phone_counts_zero_emptied_states(
        self, metrics: FarmMetrics, server: MetricsServer
    ) -> None:
        """A state that empties is published as 0, not left at its old count."""
        metrics.set_phone_counts({"ready": 3, "cooling": 1})
        metrics.set_phone_counts({"ready": 4})
        got = scrape(server)
        assert got[("farm_phones", (("state", "ready"),))] == 4
        assert got[("farm_phones", (("state", "cooling"),))] == 0

    def test_job_counts(self, metrics: FarmMetrics, server: MetricsServer) -> None:
        """Jobs by state appear under farm_jobs{state}."""
        metrics.set_job_counts({"queued": 5, "running": 2})
        got = scrape(server)
        assert got[("farm_jobs", (("state", "queued"),))] == 5
        assert got[("farm_jobs", (("state", "running"),))] == 2

    def test_temperatures_by_serial(self, metrics: FarmMetrics, server: MetricsServer) -> None:
        """A health sample sets the phone's battery temperature and thermal status series."""
        metrics.observe_health(HealthSample("ZX1G22", AT, battery_temp_c=41.2, thermal_status=2))
        metrics.observe_health(HealthSample("ZX1G22", AT))  # unknown readings keep the last
        got = scrape(server)
        assert got[("farm_phone_battery_temp_celsius", (("serial", "ZX1G22"),))] == 41.2
        assert got[("farm_phone_thermal_status", (("serial", "ZX1G22"),))] == 2

    def test_recoveries_counted_by_step(self, metrics: FarmMetrics, server: MetricsServer) -> None:
        """Each applied step increments farm_recoveries_total{serial,step}."""
        metrics.count_recovery("s1", Step.RESTART_APP)
        metrics.count_recovery("s1", Step.RESTART_APP)
        metrics.count_recovery("s1", "reboot")
        got = scrape(server)
        assert got[("farm_recoveries_total", (("serial", "s1"), ("step", "restart_app")))] == 2
        assert got[("farm_recoveries_total", (("serial", "s1"), ("step", "reboot")))] == 1

    def test_job_duration_histogram(self, metrics: FarmMetrics, server: MetricsServer) -> None:
        """Durations land in farm_job_duration_seconds buckets by kind."""
        metrics.observe_job("gemm", 3.0)
        metrics.observe_job("gemm", 40.0)
        got = scrape(server)
        kind = ("kind", "gemm")
        assert got[("farm_job_duration_seconds_count", (kind,))] == 2
        assert got[("farm_job_duration_seconds_sum", (kind,))] == 43.0
        assert got[("farm_job_duration_seconds_bucket", (kind, ("le", "5.0")))] == 1
        assert got[("farm_job_duration_seconds_bucket", (kind, ("le", "60.0")))] == 2

    def test_registries_are_private(self) -> None:
        """Two FarmMetrics never share values."""
        first, second = FarmMetrics(), FarmMetrics()
        first.count_recovery("s", "reboot")
        assert second.registry.get_sample_value(
            "farm_recoveries_total", {"serial": "s", "step": "reboot"}
        ) is None


class TestStartMetricsServer:
    def test_refuses_non_loopback(self, metrics: FarmMetrics) -> None:
        """Binding a public address is refused."""
        with pytest.raises(ConfigError) as info:
            start_metrics_server(metrics, "0.0.0.0", 0)  # noqa: S104 - refused
        assert info.value.key == "metrics.host"

    def test_busy_port_is_infra_fault(self, metrics: FarmMetrics) -> None:
        """A port already taken raises InfraFault instead of an OSError."""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            with pytest.raises(InfraFault):
                start_metrics_server(metrics, "127.0.0.1", taken.getsockname()[1])

    def test_stop_closes_the_port(self, metrics: FarmMetrics) -> None:
        """After stop() the endpoint refuses connections, and a second stop() is harmless."""
        running = start_metrics_server(metrics, "127.0.0.1", 0)
        assert scrape(running)[("farm_up", ())] == 1.0
        running.stop()
        running.stop()
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(running.url, timeout=2)  # noqa: S310 - http://127.0.0.1
