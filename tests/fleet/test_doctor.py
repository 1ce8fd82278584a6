"""``farmctl doctor`` against a real adb server, virtual phones and a real tracker."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from farm.cli.doctor import Status, run_checks
from farm.cli.main import cli
from farm.clock import wait_until
from farm.queue.models import JobState
from farm.tvm.keys import job_key, phone_key
from farm.tvm.tracker import TrackerProcess, summary
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle, free_port

pytestmark = pytest.mark.fleet


def _config(tmp_path: Path, adb_port: int, tracker_port: int) -> Path:
    path = tmp_path / "farm.toml"
    path.write_text(
        f'data_dir = "{tmp_path / "data"}"\n'
        f"[adb]\nport = {adb_port}\n"
        f"[tracker]\nport = {tracker_port}\n"
        f"[metrics]\nport = {free_port()}\n",
        encoding="utf-8",
    )
    return path


def _doctor(config: Path) -> tuple[int, dict[str, dict[str, str]]]:
    result = CliRunner().invoke(cli, ["--config", str(config), "doctor", "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    return result.exit_code, checks


class TestDoctor:
    def test_names_the_unauthorized_phone_and_the_stopped_tracker(
        self, adb_server: AdbServerHandle, make_fleet: Callable[..., Fleet], tmp_path: Path
    ) -> None:
        """One unauthorized phone and no tracker: both are named with a fix, and the exit is 1."""
        phones = make_fleet(2)
        locked, fine = phones.serials
        phones.set_unauthorized(locked)
        wait_until(lambda: adb_server.devices().get(locked) == "unauthorized", 30,
                   "phone listed unauthorized")
        exit_code, checks = _doctor(_config(tmp_path, adb_server.port, free_port()))
        assert exit_code == 1
        assert checks["adb server"]["status"] == "ok", checks["adb server"]
        assert checks[f"phone {locked}"]["status"] == "fail"
        assert checks[f"phone {locked}"]["detail"] == "unauthorized"
        assert "RSA prompt" in checks[f"phone {locked}"]["fix"]
        assert checks[f"phone {fine}"]["status"] == "ok"
        assert checks["tracker"]["status"] == "fail"
        assert "farmd" in checks["tracker"]["fix"]

    def test_a_phone_missing_at_the_tracker_is_named_with_its_key(
        self, adb_server: AdbServerHandle, make_fleet: Callable[..., Fleet], tmp_path: Path
    ) -> None:
        """With the tracker up, an attached phone whose app never registered fails its check."""
        phones = make_fleet(1)
        serial = phones.serials[0]
        with TrackerProcess.start(log_path=tmp_path / "tracker.log") as tracker:
            exit_code, checks = _doctor(_config(tmp_path, adb_server.port, tracker.port))
        assert exit_code == 1
        assert checks["tracker"]["status"] == "ok"
        check = checks[f"registered {serial}"]
        assert check["status"] == "fail"
        assert phone_key("android", serial) in check["detail"]

    def test_no_adb_server_fails_with_how_to_start_one(self, tmp_path: Path) -> None:
        """Nothing on the adb port: the adb check fails and says how to start the server."""
        exit_code, checks = _doctor(_config(tmp_path, free_port(), free_port()))
        assert exit_code == 1
        assert checks["adb server"]["status"] == "fail"
        assert "start-server" in checks["adb server"]["fix"]
        assert checks["database"]["status"] == "warn"


class TestDoctorDuringATune:
    @pytest.mark.slow
    def test_passes_while_a_tune_holds_two_phones(self, start_farmd) -> None:  # type: ignore[no-untyped-def]
        """Phones serving their tuning job's key are registered as they should be: no failure."""
        farm = start_farmd(2, same_model=True)
        tracker = farm.farmd.settings.tracker
        job_id = farm.enqueue({"kind": "tune", "attempts": 1, "params": {
            "gemm": {"n": 64, "number": 2, "repeat": 3}, "trials": 4, "trials_per_batch": 2,
            "phones": 2}})
        key = job_key(tracker.key, job_id)
        assert wait_until(lambda: len(summary(tracker.host, tracker.port).servers_for(key)) == 2,
                          300), "both phones serve the job's key"
        checks = run_checks(farm.farmd.settings, farmd_running=True)
        assert farm.store.get_job(job_id).state is JobState.RUNNING  # the tune held them throughout
        assert [c for c in checks if c.status is Status.FAIL] == []
        registered = {c.name: c.detail for c in checks if c.name.startswith("registered ")}
        assert registered == {f"registered {s}": f"as {key} (its job's key)" for s in farm.serials}
        farm.store.cancel(job_id, farm.farmd.clock.now())  # its end is another test's business
