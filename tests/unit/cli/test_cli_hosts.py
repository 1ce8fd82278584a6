"""farmctl with several farmd hosts: a dead host's phones are unreachable and get no --each job."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from device_states import put_state

import farm
from farm.queue import DeviceState, Store
from farm.queue.db import head_revision

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _hosts(store: Store) -> None:
    """Host ``live`` (beating now) owns phone L; host ``dead`` (a day silent) owns D; both ready."""
    now = datetime.now(UTC)  # farmctl judges liveness by the real clock
    store.register_host("live", "10.0.0.1", 9190, now)
    store.register_host("dead", "10.0.0.2", 9190, now - timedelta(days=1))
    for serial, host in (("L", "live"), ("D", "dead")):
        store.adopt_device(serial, host, T0, dead_after_s=60)
        store.upsert_device(serial, T0, {"abi": "arm64-v8a"})
        put_state(store, serial, DeviceState.READY, "test", T0)


class TestDevicesOfDeadHosts:
    def test_dead_hosts_phone_is_unreachable(self, farmctl, store: Store) -> None:
        """devices --json names each phone's host and marks the dead host's unreachable."""
        _hosts(store)
        result = farmctl("devices", "--json", "--all")
        assert result.exit_code == 0, result.output
        rows = {r["serial"]: r for r in json.loads(result.stdout)}
        assert (rows["D"]["host"], rows["D"]["unreachable"]) == ("dead", True)
        assert rows["D"]["shown_state"] == "unreachable (was ready)"
        assert rows["D"]["state"] == "ready"  # the dead host's last word, kept
        assert (rows["L"]["host"], rows["L"]["unreachable"]) == ("live", False)
        assert rows["L"]["shown_state"] == "ready"

    def test_table_shows_unreachable(self, farmctl, store: Store) -> None:
        """The table's state column says unreachable for the dead host's phone."""
        _hosts(store)
        result = farmctl("devices", "--all")
        assert result.exit_code == 0, result.output
        assert "unreachable" in result.stdout

    def test_unreachable_phone_is_hidden_by_default_and_its_health_unknown(
            self, farmctl, store: Store) -> None:
        """Without --all the dead host's phone is hidden and counted; with it, health is unknown."""
        _hosts(store)
        result = farmctl("devices", "--json")
        assert [r["serial"] for r in json.loads(result.stdout)] == ["L"]
        assert "1 offline or unreachable device hidden (--all shows them)" in result.stderr
        rows = {r["serial"]: r for r in json.loads(farmctl("devices", "--json", "--all").stdout)}
        assert (rows["D"]["health"], rows["D"]["stale"]) == ("unknown", True)
        assert rows["D"]["health_reason"].startswith("not probed: its host is unreachable")
        assert (rows["L"]["stale"], rows["L"]["health"]) == (False, "unknown")  # never judged


class TestEachSkipsDeadHosts:
    def test_each_fans_out_over_live_hosts_only(self, farmctl, store: Store) -> None:
        """--each pins one job to the live host's phone and none to the dead host's."""
        _hosts(store)
        result = farmctl("enqueue", "gemm", "--n", "64", "--each", "--json")
        assert result.exit_code == 0, result.output
        jobs = json.loads(result.stdout)["jobs"]
        assert [j["spec"]["devices"]["serials"] for j in jobs] == [["L"]]


class TestHostsCommand:
    def test_lists_alive_and_dead_hosts(self, farmctl, store: Store) -> None:
        """hosts --json gives each host's status, tracker and phone count."""
        _hosts(store)
        result = farmctl("hosts", "--json")
        assert result.exit_code == 0, result.output
        rows = {r["host_id"]: r for r in json.loads(result.stdout)}
        assert (rows["live"]["status"], rows["live"]["tracker"], rows["live"]["phones"]) == (
            "alive", "10.0.0.1:9190", 1)
        assert rows["dead"]["status"] == "dead" and rows["dead"]["heartbeat_age_s"] >= 86400
        assert "dead" in farmctl("hosts").stdout

    def test_shows_schema_and_version(self, farmctl, store: Store) -> None:
        """Each host's schema revision and farm version, as its farmd recorded them."""
        _hosts(store)
        rows = json.loads(farmctl("hosts", "--json").stdout)
        assert {(r["schema_revision"], r["code_version"]) for r in rows} == {
            (head_revision(), farm.__version__)}
        table = farmctl("hosts").stdout
        assert "schema" in table and head_revision() in table and farm.__version__ in table
