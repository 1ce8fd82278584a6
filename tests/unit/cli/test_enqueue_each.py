"""``farmctl enqueue gemm|model --each``: one job per matching phone, under one run id."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from device_states import put_state

from farm.queue import DeviceState, Store

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _phones(store: Store, **states: DeviceState) -> None:
    for serial, state in states.items():
        store.upsert_device(serial, NOW, {"abi": "arm64-v8a", "soc": f"soc-{serial}"})
        put_state(store, serial, state, "test", NOW)


class TestEach:
    def test_one_job_per_phone_in_service_one_run(self, farmctl, store: Store) -> None:
        """Three phones in service give three jobs, each pinned to one, sharing a run id."""
        _phones(store, A=DeviceState.READY, B=DeviceState.PROVISIONING, C=DeviceState.COOLING,
                Q=DeviceState.QUARANTINED)
        result = farmctl("enqueue", "gemm", "--n", "64", "--each", "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["run_id"].startswith("r-") and len(data["run_id"]) == 14
        jobs = data["jobs"]
        assert sorted(j["spec"]["devices"]["serials"][0] for j in jobs) == ["A", "B", "C"]
        assert {j["run_id"] for j in jobs} == {data["run_id"]}
        assert all(j["spec"]["devices"]["count"] == 1 for j in jobs)

    def test_selection_limits_the_fan_out(self, farmctl, store: Store) -> None:
        """--soc keeps only the matching phone; the text output names the run and each job."""
        _phones(store, A=DeviceState.READY, B=DeviceState.READY)
        result = farmctl("enqueue", "gemm", "--n", "64", "--each", "--soc", "soc-B")
        assert result.exit_code == 0, result.output
        assert "1 jobs queued" in result.stdout and "job 1 on B" in result.stdout
        assert [j.run_id is not None for j in store.list_jobs()] == [True]

    def test_nothing_matches_is_a_clear_error(self, farmctl, store: Store) -> None:
        """No phone fitting: exit 2, one line saying why, nothing stored."""
        _phones(store, A=DeviceState.READY)
        result = farmctl("enqueue", "gemm", "--n", "64", "--each", "--soc", "nope")
        assert result.exit_code == 2
        assert result.stderr.startswith("Error: --each: no phone to run on now: 0 phones match")
        assert store.list_jobs() == []

    def test_reserved_phone_is_skipped_and_said(self, farmctl, store: Store) -> None:
        """A phone reserved by a person gets no job; farmctl says how many it skipped and why."""
        _phones(store, A=DeviceState.READY, B=DeviceState.READY)
        store.reserve("B", "alice", datetime.now(UTC) + timedelta(hours=1), datetime.now(UTC))
        result = farmctl("enqueue", "gemm", "--n", "64", "--each", "--json")
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert [j["spec"]["devices"]["serials"][0] for j in data["jobs"]] == ["A"]
        assert data["skipped"][0].startswith("B: reserved by alice until ")
        assert "skipped 1 reserved phone (" in result.stderr and "B: reserved by alice" in (
            result.stderr)

    def test_jobs_queued_from_the_cli_carry_the_login_name(self, farmctl, store: Store,
                                                           monkeypatch) -> None:
        """A job queued by farmctl on the farm host belongs to the local user."""
        monkeypatch.setenv("USER", "dana")
        monkeypatch.setenv("LOGNAME", "dana")
        _phones(store, A=DeviceState.READY)
        assert farmctl("enqueue", "gemm", "--n", "64").exit_code == 0
        assert [j.owner for j in store.list_jobs()] == ["dana"]

    def test_drained_phone_gets_no_job(self, farmctl, store: Store) -> None:
        """A drained phone is not in service: with only it, --each refuses."""
        _phones(store, A=DeviceState.READY)
        store.set_drained("A", True, "test", NOW)
        result = farmctl("enqueue", "gemm", "--n", "64", "--each")
        assert result.exit_code == 2 and "no phone to run on now" in result.stderr

    def test_count_with_each_is_refused(self, farmctl, store: Store) -> None:
        """--count asks for several phones in one job; --each for one job per phone."""
        _phones(store, A=DeviceState.READY, B=DeviceState.READY)
        result = farmctl("enqueue", "gemm", "--n", "64", "--each", "--count", "2")
        assert result.exit_code == 2 and "--count" in result.stderr
        assert store.list_jobs() == []

    def test_tune_has_no_each(self, farmctl) -> None:
        """tune needs its phones at once: it offers no --each."""
        assert "--each" not in farmctl("enqueue", "tune", "--help").stdout
        assert "--each" in farmctl("enqueue", "model", "--help").stdout
