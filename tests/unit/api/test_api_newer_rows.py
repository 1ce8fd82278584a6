"""A rolling-upgrade drill: this farm's host beside rows a newer farm wrote into the database.

The newer farm (version ``0.2.0``) has a device kind (``hologram``), a job kind
(``hologram_bench``), a job state (``paused``) and a reading (``fan_rpm``) that
this farm lacks. Every API route and ``farmctl`` command of this farm answers
(no 500, no traceback), shows what it cannot read as unknown, and this farm's
dispatcher starts only the job it knows on the device it knows: nothing is failed
for being unknown. On one real store (SQLite, and PostgreSQL where CI has it).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import sqlalchemy as sa
from api_helpers import T0, Api, flat_routes
from click.testing import CliRunner, Result
from device_states import put_state
from pydantic import TypeAdapter

from farm.api.schemas import DeviceOut, JobDetailOut, JobOut, SubmittedOut
from farm.cli.main import cli
from farm.clock import FakeClock
from farm.config import Settings
from farm.queue import DeviceState, JobState, Store
from farm.queue.models import Host, Job
from farm.runner.dispatcher import Dispatcher

NEWER_KIND = "hologram_bench"
WAITS = (f"job kind {NEWER_KIND!r} is not known to this farm (version 0.1.0): "
         "waits for a host that knows it")
PHONE = {"abi": "arm64-v8a", "sdk": 30, "soc": "SM8150"}


@dataclass(frozen=True)
class Rows:
    """The jobs of the drill: this farm's gemm, the newer kind's job and the paused job."""

    gemm: int
    newer_kind: int
    paused: int


@pytest.fixture
def rows(api: Api) -> Rows:
    """This farm's phone and gemm job, and what the newer farm wrote beside them."""
    store = api.store
    store.upsert_device("P1", T0, PHONE)
    put_state(store, "P1", DeviceState.READY, "provisioned", T0)
    store.record_health("P1", T0, {"app_running": True}, {"battery_pct": 80.0})
    # The newer farm's host, its hologram (owned by no host yet, so this host plans
    # over it too) and the hologram's readings, through the same store calls its farmd makes.
    store.upsert_device("holo", T0, {"abi": "arm64-v8a", "model": "Hologram One"},
                        kind="hologram")
    put_state(store, "holo", DeviceState.READY, "provisioned", T0)
    store.record_health("holo", T0, {"app_running": True}, {"fan_rpm": 1200.0})
    gemm = store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
    newer_kind = store.enqueue({"kind": "gemm", "params": {"n": 64}, "priority": 5}, T0)
    paused = store.enqueue({"kind": "gemm", "params": {"n": 64}, "priority": 5}, T0)
    with store._engine.begin() as connection:  # rows this farm's store would refuse to write
        connection.execute(sa.insert(Host).values(
            host_id="newer", started_at=T0, heartbeat_at=T0, tracker_host="127.0.0.1",
            tracker_port=9190, info={}, schema_revision="0099", code_version="0.2.0"))
        connection.execute(sa.update(Job).where(Job.id == newer_kind).values(
            kind=NEWER_KIND, spec={"kind": NEWER_KIND, "params": {"frames": 3}}))
        connection.execute(sa.text("UPDATE jobs SET state = 'paused' WHERE id = :id"),
                           {"id": paused})
    return Rows(gemm, newer_kind, paused)


@pytest.fixture
def farmctl(api: Api, tmp_path: Path) -> Callable[..., Result]:
    """farmctl of this farm on the drill's database (no farmd: it reads the store itself)."""
    config = tmp_path / "farmctl.toml"
    config.write_text(f'data_dir = "{tmp_path / "cli"}"\ndatabase_url = "{api.store.url}"\n')
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(cli, ["--config", str(config), *args], env={"FARM_CONFIG": None})

    return run


def _no_traceback(result: Result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


class TestApi:
    def test_every_get_route_answers(self, api: Api, rows: Rows) -> None:
        """Every GET route, with each job and device of the drill, answers below 500."""
        login = api.client.post("/login", data={"token": api.operator, "next": "/"},
                                follow_redirects=False)
        assert login.status_code == 303  # the dashboard's pages read the cookie
        values = {"job_id": [rows.gemm, rows.newer_kind, rows.paused], "serial": ["P1", "holo"]}
        asked = 0
        for route in flat_routes(list(api.client.app.routes)):  # type: ignore[attr-defined]
            if "GET" not in (getattr(route, "methods", None) or ()):
                continue
            names = re.findall(r"\{(\w+)[^}]*\}", route.path)
            for value in ([None] if not names else values[names[0]]):
                path = re.sub(r"\{[^}]+\}", lambda _m, v=value: quote(str(v), safe=""),
                              route.path)
                for name in names[1:]:  # /jobs/{job_id}/outputs/{serial}
                    path = path.replace(f"{{{name}:path}}", "P1").replace(f"{{{name}}}", "P1")
                answer = api.client.get(path, headers=api.auth(api.operator))
                assert answer.status_code < 500, (path, answer.text)
                asked += 1
        assert asked > 40

    def test_jobs_show_the_unknown_state_and_why_the_unknown_kind_waits(
        self, api: Api, rows: Rows
    ) -> None:
        """GET /api/v1/jobs: ``state: unknown`` with ``unknown_state: paused``; the newer
        kind's job waits with the reason; the gemm job waits only for the hologram."""
        answer = api.client.get("/api/v1/jobs", headers=api.auth(api.alice))
        assert answer.status_code == 200, answer.text
        jobs = {out["job"]["id"]: out for out in answer.json()}
        paused = jobs[rows.paused]["job"]
        assert (paused["state"], paused["unknown_state"]) == ("unknown", "paused")
        assert jobs[rows.newer_kind]["waiting"] == WAITS
        assert jobs[rows.newer_kind]["job"]["unknown_state"] is None
        listed = api.client.get("/api/v1/jobs", params={"state": "unknown"},
                                headers=api.auth(api.alice))
        assert [out["job"]["id"] for out in listed.json()] == [rows.paused]

    def test_cancel_leaves_the_paused_job_to_the_farm_that_knows_it(
        self, api: Api, rows: Rows
    ) -> None:
        """Cancelling the paused job is a 409 saying why; the row keeps the newer farm's state."""
        answer = api.client.post(f"/api/v1/jobs/{rows.paused}/cancel",
                                 headers=api.auth(api.operator))
        assert answer.status_code == 409
        assert answer.json()["error"] == (
            f"job {rows.paused} is paused (unknown): a state this farm does not know; "
            "cancel it from a host of a farm that knows it")
        view = api.store.get_job(rows.paused)
        assert view is not None and view.unknown_state == "paused"

    def test_the_unknown_reading_and_device_kind_are_marked(self, api: Api, rows: Rows) -> None:
        """GET /api/v1/devices lists the hologram with its reading marked not known."""
        answer = api.client.get("/api/v1/devices", headers=api.auth(api.alice))
        assert answer.status_code == 200, answer.text
        holo = next(d for d in answer.json() if d["serial"] == "holo")
        assert holo["kind"] == "hologram"
        assert [(v["name"], v["known"]) for v in holo["values"]] == [("fan_rpm", False)]


class TestFarmctl:
    def test_every_command_answers_and_shows_unknown(
        self, farmctl: Callable[..., Result], rows: Rows
    ) -> None:
        """jobs, job, devices, hosts and results answer; what this farm cannot read is unknown."""
        ids = [str(job_id) for job_id in (rows.gemm, rows.newer_kind, rows.paused)]
        for args in (["jobs"], ["jobs", "--state", "unknown"], ["devices", "--all"],
                     ["devices", "--json"], ["hosts"], ["results", "--job", str(rows.gemm)],
                     *(["job", job_id] for job_id in ids),
                     *(["job", job_id, "--json"] for job_id in ids)):
            result = farmctl(*args)
            _no_traceback(result)
            assert result.exit_code == 0, (args, result.output)

        table = farmctl("jobs").stdout
        assert re.search(rf"^{rows.paused}\tgemm\t.*\tpaused \(unknown\)\t", table, re.M), table
        assert WAITS in table
        detail = farmctl("job", str(rows.paused)).stdout
        assert "paused (unknown)" in detail
        listed = json.loads(farmctl("jobs", "--json").stdout)
        paused = next(j for j in listed if j["id"] == rows.paused)
        assert (paused["state"], paused["unknown_state"]) == ("unknown", "paused")
        devices = farmctl("devices").stdout
        assert "ready (unknown kind hologram)" in devices
        assert "fan_rpm 1200 (unknown)" in devices
        assert "0.2.0" in farmctl("hosts").stdout

    def test_cancel_and_wait_on_the_paused_job_say_so_in_one_line(
        self, farmctl: Callable[..., Result], rows: Rows
    ) -> None:
        """cancel exits 1 naming the state; wait times out (124) still ``paused (unknown)``."""
        cancelled = farmctl("cancel", str(rows.paused))
        _no_traceback(cancelled)
        assert cancelled.exit_code == 1
        assert f"job {rows.paused} is paused (unknown)" in cancelled.stderr
        waited = farmctl("wait", str(rows.paused), "--timeout", "0.01", "--poll", "0.01")
        _no_traceback(waited)
        assert waited.exit_code == 124
        assert f"job {rows.paused} still paused (unknown)" in waited.stderr


class TestFarmd:
    def test_a_tick_starts_only_what_this_farm_knows(
        self, api: Api, rows: Rows, tmp_path: Path
    ) -> None:
        """The gemm starts on the phone; the newer kind's job, the paused job and the hologram
        are left as the newer farm wrote them: queued, paused, ready, never failed."""
        store: Store = api.store
        settings = Settings(data_dir=tmp_path / "farmd", database_url=store.url)
        dispatcher = Dispatcher(store, settings, FakeClock(T0),
                                command=lambda *_: [sys.executable, "-c", "pass"])
        report = dispatcher.tick(T0)
        for child in dispatcher.children.values():
            child.process.wait()
        assert len(report.started) == 1
        assert [a.serials for a in store.attempts(rows.gemm)] == [("P1",)]
        newer = store.get_job(rows.newer_kind)
        assert newer is not None and newer.state is JobState.QUEUED
        assert (newer.attempts_made, newer.error, store.attempts(rows.newer_kind)) == (0, None, [])
        paused = store.get_job(rows.paused)
        assert paused is not None and paused.unknown_state == "paused"
        holo = store.get_device("holo")
        assert holo is not None and (holo.state, holo.attempt_id) == (DeviceState.READY, None)


class TestNewerServer:
    """``farmctl --server`` of this farm reads a newer server's answers (its states as written)."""

    def test_its_job_state_reads_as_unknown(self, api: Api, rows: Rows) -> None:
        """A job whose ``state`` is ``paused`` in the JSON reads as ``paused (unknown)``."""
        listed = api.client.get("/api/v1/jobs", headers=api.auth(api.alice)).json()
        detail = api.client.get(f"/api/v1/jobs/{rows.paused}", headers=api.auth(api.alice)).json()
        as_newer = [{**out, "job": {**out["job"], "state": "paused", "unknown_state": None}}
                    for out in listed if out["job"]["id"] == rows.paused]
        detail["job"] = as_newer[0]["job"]
        read = TypeAdapter(list[JobOut]).validate_python(as_newer)
        assert [out.job.shown_state for out in read] == ["paused (unknown)"]
        assert JobDetailOut.model_validate(detail).job.unknown_state == "paused"
        submitted = SubmittedOut.model_validate({"jobs": [as_newer[0]["job"]]})
        assert submitted.jobs[0].state is JobState.UNKNOWN

    def test_its_device_state_reads_as_unknown(self, api: Api, rows: Rows) -> None:
        """A device whose ``state`` is ``parked`` in the JSON reads as ``unknown``."""
        devices = api.client.get("/api/v1/devices", headers=api.auth(api.alice)).json()
        read = TypeAdapter(list[DeviceOut]).validate_python(
            [{**d, "state": "parked"} for d in devices])
        assert {d.state for d in read} == {DeviceState.UNKNOWN}
