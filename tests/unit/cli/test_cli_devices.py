"""``farmctl devices``: state, health with its reason, battery, thermal, last seen."""

from __future__ import annotations

import json
import re
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


def farmctl(config: Path, *args: str, terminal_columns: int | None = None) -> Result:
    """Run farmctl with the test config; with ``terminal_columns``, as on a terminal that wide."""
    env: dict[str, str | None] = {"FARM_CONFIG": None}
    if terminal_columns is not None:  # rich's own variables: a terminal, this wide
        env.update(TTY_COMPATIBLE="1", COLUMNS=str(terminal_columns), NO_COLOR="1")
    return CliRunner().invoke(cli, ["--config", str(config), *args], env=env)


def _screen(result: Result) -> list[str]:
    """What a terminal shows of stdout: its lines without colour codes or trailing blanks."""
    return [re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip() for line in result.stdout.splitlines()]


#: A phone's five readings that can keep a job off it, as the table writes them.
_READINGS = {"battery_pct": 81, "battery_temp_c": 31.5, "thermal_status": 1,
             "max_zone_temp_c": 45.2, "free_storage_mb": 12345.6}
_SHOWN = ["battery_pct 81 %", "battery_temp_c 31.5 °C", "thermal_status 1",
          "max_zone_temp_c 45.2 °C", "free_storage_mb 12345.6 MiB"]


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

    def test_piped_table_keeps_every_cell_whole(self, config: Path, store: Store) -> None:
        """Off a terminal the table is tab-separated: a long serial is printed whole, once."""
        serial = "127.0.0.1:40123-a-serial-as-long-as-emulators-and-boards-make-them"
        store.upsert_device(serial, NOW, {"abi": "x86_64", "soc": "a-long-soc-name-" * 4})
        lines = farmctl(config, "devices").stdout.splitlines()
        assert lines[0].split("\t")[:3] == ["serial", "state", "health"]
        assert [line.split("\t")[0] for line in lines[1:]] == [serial, "R1", "R2"]
        wide = farmctl(config, "devices", "--wide").stdout.splitlines()
        assert wide[0].split("\t")[:3] == ["serial", "host", "state"]
        assert "a-long-soc-name-" * 4 in wide[1].split("\t")

    @pytest.mark.parametrize("terminal_columns", [100, 120])
    def test_terminal_table_fits_100_columns_serials_and_readings_whole(
            self, config: Path, store: Store, terminal_columns: int) -> None:
        """On a 100- or 120-column terminal the table fits: serials whole, a reading a line."""
        serial = "127.0.0.1:40123"
        store.upsert_device(serial, NOW, {"abi": "arm64-v8a", "sdk": 34, "soc": "SM8150",
                                          "gpu": "Adreno (TM) 640"})
        store.record_health(serial, NOW, _READINGS)
        store.set_device_health(serial, DeviceHealth.BAD,
                                "battery_temp_c 41.2 > 40 (cooling before a job)", NOW)
        screen = _screen(farmctl(config, "devices", terminal_columns=terminal_columns))
        assert max(len(line) for line in screen) <= terminal_columns
        assert "…" not in "".join(screen)
        rows = [line.split("│")[1:-1] for line in screen if line.startswith("│")]
        assert [cells[0].strip() for cells in rows if cells[0].strip()] == [serial, "R1", "R2"]
        first = rows.index(next(cells for cells in rows if cells[0].strip() == serial))
        assert [cells[4].strip() for cells in rows[first:first + 5]] == _SHOWN  # R1 is next

    def test_wide_table_keeps_every_cell_on_one_line(self, config: Path, store: Store) -> None:
        """--wide adds host, facts and last seen, a cell a line, past the terminal's width."""
        store.record_health("R2", NOW, _READINGS)
        screen = _screen(farmctl(config, "devices", "--wide", terminal_columns=100))
        header = [cell.strip() for cell in next(x for x in screen if x.startswith("┃")).split("┃")]
        assert {"host", "abi", "soc", "gpu", "held by", "reserved", "last seen"} <= set(header)
        r2 = [line for line in screen if "│ R2 " in line]
        assert len(r2) == 1 and "SM8150" in r2[0] and "ready" not in r2[0]  # R2 is busy
        assert len(r2[0]) > 100

    def test_an_emulated_board_shows_as_aarch64_emulated(self, config: Path, store: Store) -> None:
        """A board under QEMU reads "aarch64, emulated" in --wide and emulated true in --json."""
        store.upsert_device("va1", NOW, {"abi": "aarch64", "emulated": True}, kind="board")
        store.move_device("va1", DeviceState.READY, "test", NOW,
                          expect_state=DeviceState.DISCOVERED)
        rows = {r["serial"]: r for r in json.loads(farmctl(config, "devices", "--json").stdout)}
        assert (rows["va1"]["abi"], rows["va1"]["emulated"]) == ("aarch64", True)
        assert rows["R1"]["emulated"] is False
        screen = _screen(farmctl(config, "devices", "--wide", terminal_columns=100))
        [va1] = [line for line in screen if "│ va1 " in line]
        assert "aarch64, emulated" in va1

    def test_offline_phone_is_hidden_then_shown_stale_with_health_unknown(
            self, config: Path, store: Store) -> None:
        """An offline phone is hidden and counted; --all shows health unknown, readings stale."""
        store.move_device("R1", DeviceState.OFFLINE, "unplugged", NOW,
                          expect_state=DeviceState.READY)
        listed = farmctl(config, "devices", "--json")
        assert [r["serial"] for r in json.loads(listed.stdout)] == ["R2"]
        assert "1 offline or unreachable device hidden (--all shows them)" in listed.stderr
        rows = {r["serial"]: r for r in json.loads(
            farmctl(config, "devices", "--json", "--all").stdout)}
        r1 = rows["R1"]
        assert (r1["health"], r1["stale"], r1["battery_pct"]) == ("unknown", True, 81)
        assert r1["health_reason"] == "not probed: offline; last bad: battery_pct 5 < 20"
        assert r1["readings_age_s"] > 3600 and r1["readings"].startswith("stale, ")
        assert (rows["R2"]["stale"], rows["R2"]["readings"]) == (False, "none")
