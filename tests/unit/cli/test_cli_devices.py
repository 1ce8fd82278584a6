"""``farmctl devices``: state, health with its reason, battery, thermal, last seen."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from farm.cli.main import cli
from farm.queue import DeviceHealth, DeviceState, Store
from farm.queue.scheduler import Assignment

NOW = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def store(config: Path) -> Iterator[Store]:
    """The queue farmctl uses, with one ready phone R1 sampled once and one busy drained R2."""
    with Store(f"sqlite:///{config.parent / 'data' / 'farm.db'}") as opened:
        for serial in ("R1", "R2"):
            opened.upsert_device(serial, NOW, {"abi": "arm64-v8a", "sdk": 34, "soc": "SM8150"})
            opened.move_device(serial, DeviceState.READY, "test", NOW,
                               expect_state=DeviceState.DISCOVERED)
        opened.record_health("R1", NOW, {"battery_pct": 81, "battery_temp_c": 31.5,
                                         "thermal_status": 1})
        opened.set_device_health("R1", DeviceHealth.BAD, "battery_pct 5 < 20", NOW)
        job_id = opened.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        opened.claim([Assignment(job_id, ("R2",), 60.0)], NOW)
        opened.set_drained("R2", True, "test", NOW)
        yield opened


def farmctl(config: Path, *args: str) -> Result:
    """Run farmctl with the test config."""
    return CliRunner().invoke(cli, ["--config", str(config), *args], env={"FARM_CONFIG": None})


class TestDevices:
    def test_json_carries_health_battery_thermal(self, config: Path, store: Store) -> None:
        """--json has state, health, the latest battery %, °C and thermal status, last seen."""
        result = farmctl(config, "devices", "--json")
        assert result.exit_code == 0, result.output
        rows = {r["serial"]: r for r in json.loads(result.stdout)}
        r1 = rows["R1"]
        assert (r1["state"], r1["health"]) == ("ready", "bad")
        assert (r1["battery_pct"], r1["battery_temp_c"], r1["thermal_status"]) == (81, 31.5, 1)
        assert r1["last_seen"].startswith("2025-01-01") and r1["sampled_at"].startswith("2025")
        assert rows["R2"]["battery_pct"] is None  # never sampled: unknown, not guessed

    def test_busy_drained_phone_shows_draining(self, config: Path, store: Store) -> None:
        """A drained phone still running its attempt shows as draining."""
        rows = {r["serial"]: r for r in json.loads(farmctl(config, "devices", "--json").stdout)}
        assert (rows["R2"]["state"], rows["R2"]["shown_state"]) == ("busy", "draining")
        assert rows["R2"]["drained"] is True

    def test_table_shows_the_same(self, config: Path, store: Store) -> None:
        """The table shows health, battery, temperature and draining."""
        out = farmctl(config, "devices").stdout
        assert "draining" in out and "bad" in out and "31.5" in out and "81" in out
