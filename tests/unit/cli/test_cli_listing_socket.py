"""``farmctl jobs`` and ``devices`` answered by farmd's listing socket (farm.api.local, issue 25).

farmd builds the rows on its open store; farmctl then imports neither SQLAlchemy
nor pydantic. The rows must be the ones farmctl builds on the database itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from farm.api.local import ListingServer, ask_farmd
from farm.cli.main import cli
from farm.clock import SystemClock
from farm.config import load_config
from farm.queue import DeviceHealth, DeviceState, Store
from farm.queue.scheduler import Assignment

NOW = datetime(2025, 1, 1, tzinfo=UTC)
LISTINGS = [["jobs"], ["jobs", "--json"], ["jobs", "--state", "queued"], ["devices"],
            ["devices", "--json"], ["devices", "--all"]]


@pytest.fixture
def fleet(store: Store) -> Store:
    """Phones and jobs of every kind of row: sampled and bad, busy and drained, reserved,
    offline (hidden), a running job and a queued one that waits for a phone."""
    for serial in ("R1", "R2", "R3", "R4"):
        store.upsert_device(serial, NOW, {"abi": "arm64-v8a", "sdk": 34, "soc": "SM8150"})
        store.move_device(serial, DeviceState.READY, "test", NOW,
                          expect_state=DeviceState.DISCOVERED)
    store.record_health("R1", NOW, {"battery_pct": 81, "battery_temp_c": 31.5,
                                    "thermal_status": 1})
    store.set_device_health("R1", DeviceHealth.BAD, "battery_pct 5 < 20", NOW)
    running = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
    store.claim([Assignment(running, ("R2",), 60.0)], NOW)
    store.set_drained("R2", True, "test", NOW)
    store.reserve("R3", "alice", datetime(2100, 1, 1, tzinfo=UTC), NOW)
    store.move_device("R4", DeviceState.OFFLINE, "unplugged", NOW,
                      expect_state=DeviceState.READY)
    store.enqueue({"kind": "gemm", "params": {"n": 64}, "devices": {"soc": "no-such-soc"}}, NOW)
    return store


@pytest.fixture
def farmd_listing(config: Path, fleet: Store) -> Iterator[ListingServer]:
    """farmd's side of the socket on the test's store, as farmd starts it."""
    settings = load_config(config, env={})
    server = ListingServer(Path(settings.data_dir), fleet, settings, SystemClock())
    yield server
    server.close()


def _ageless(listing: str) -> list[dict[str, object]]:
    """``devices --json`` rows without ``readings_age_s``, which grows between two calls."""
    rows: list[dict[str, object]] = json.loads(listing)
    for row in rows:
        assert row.pop("readings_age_s") is None or row["sampled_at"] is not None
    return rows


def _farmctl(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(config), *args], env={"FARM_CONFIG": None})


class TestListingSocket:
    def test_farmd_lists_what_farmctl_reads_from_the_database(
            self, config: Path, fleet: Store) -> None:
        """Every listing prints the same lines whether farmd or the database answers it."""
        from_database = {" ".join(argv): _farmctl(config, *argv) for argv in LISTINGS}
        settings = load_config(config, env={})
        server = ListingServer(Path(settings.data_dir), fleet, settings, SystemClock())
        try:
            from_farmd = {" ".join(argv): _farmctl(config, *argv) for argv in LISTINGS}
        finally:
            server.close()
        for name, result in from_farmd.items():
            assert result.exit_code == 0, result.output
            if name == "devices --json":  # the readings' age grew between the two calls
                assert _ageless(result.stdout) == _ageless(from_database[name].stdout)
                continue
            assert result.stdout == from_database[name].stdout, name
        # The database's table says no farmd runs; farmd's answer is proof that one does.
        assert "no farmd is running" in from_database["jobs"].stderr
        assert "no farmd is running" not in from_farmd["jobs"].stderr
        assert "waiting" in from_farmd["jobs --json"].stdout
        assert "1 offline or unreachable device hidden" in from_farmd["devices"].stderr

    def test_another_database_is_refused(self, config: Path,
                                         farmd_listing: ListingServer) -> None:
        """Settings naming another database than farmd's get no rows: farmctl reads that one."""
        data_dir = config.parent / "data"
        same = ask_farmd(data_dir, "jobs", {"data_dir": str(data_dir)},
                         {"states": [], "limit": 10, "as_json": True})
        assert same is not None and len(same) == 2
        other = {"data_dir": str(data_dir), "database_url": f"sqlite:///{config.parent}/o.db"}
        assert ask_farmd(data_dir, "jobs", other, {"states": [], "limit": 10,
                                                   "as_json": True}) is None
        assert ask_farmd(data_dir, "jobs", {"data_dir": str(data_dir), "adb": {"port": -1}},
                         {"states": [], "limit": 10, "as_json": True}) is None
        for garbage in (b"not json\n", b'{"listing": "jobs"}\n', b'["devices"]\n'):
            assert "refused" in farmd_listing.answer(garbage)
        rows, hidden = ask_farmd(data_dir, "devices", {"data_dir": str(data_dir)},
                                 {"show_all": True})  # still serving
        assert ([row["serial"] for row in rows], hidden) == (["R1", "R2", "R3", "R4"], 0)

    def test_answered_listings_load_neither_sqlalchemy_nor_pydantic(
            self, config: Path, farmd_listing: ListingServer) -> None:
        """With farmd answering, jobs and devices import no ORM and no settings' models."""
        probe = ("import json, sys\nfrom farm.cli.main import main\n"
                 "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
                 "sys.stderr.write('LOADED' + json.dumps(sorted(m for m in ('sqlalchemy', "
                 "'pydantic', 'structlog', 'rich') if m in sys.modules)))\n")
        for argv in (["jobs"], ["devices", "--json"]):
            done = subprocess.run([sys.executable, "-c", probe, "--config", str(config), *argv],
                                  capture_output=True, text=True, timeout=60, check=True)
            assert done.stderr.rsplit("LOADED", 1)[1] == "[]", done.stderr
            assert json.loads(done.stdout) if "--json" in argv else "job" in done.stdout
