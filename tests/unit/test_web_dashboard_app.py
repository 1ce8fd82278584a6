"""The dashboard's login, pages and JSON views in-process (no browser; see
tests/fleet/test_web_dashboard.py for the real one)."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from device_states import put_state
from fastapi.testclient import TestClient
from tuned_jobs import model_tune_job

from farm.api.context import ApiContext
from farm.clock import FakeClock
from farm.config import Settings
from farm.demo_model import write_small_cnn
from farm.errors import UserFault
from farm.jobs.bundle import LIBRARY, MANIFEST, MODEL
from farm.jobs.tune_model import TUNED_LIBRARY
from farm.jobs.tune_records import RECORDS_FILE, WORKLOADS_FILE, trial_run_s
from farm.kinds.run import tune_work_dir
from farm.queue import DeviceState, Outcome, Store
from farm.queue.scheduler import Assignment
from farm.serve.app import create_app
from farm.web import views
from farm.web.login import safe_next

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class Farm:
    """A store, settings and a client of the app over them."""

    def __init__(self, tmp_path: Path) -> None:
        self.settings = Settings.model_validate({"data_dir": str(tmp_path / "farm")})
        self.store = Store(self.settings.database_url)
        self.client = TestClient(create_app(ApiContext(self.store, self.settings,
                                                       FakeClock(T0))))
        self.token = self.store.create_token("alice", T0)
        self.operator = self.store.create_token("ops", T0, operator=True)

    def log_in(self, token: str) -> None:
        answer = self.client.post("/login", data={"token": token, "next": "/"},
                                  follow_redirects=False)
        assert answer.status_code == 303


@pytest.fixture
def farm(tmp_path: Path) -> Iterator[Farm]:
    made = Farm(tmp_path)
    yield made
    made.client.close()
    made.store.close()


PAGES = ["/", "/queue", "/jobs/1", "/compare?a=1&b=2", "/history?workload=x"]
DATA = ["/api/v1/dashboard/jobs/1/trials", "/api/v1/dashboard/incidents",
        "/api/v1/dashboard/compare?a=1&b=2", "/api/v1/dashboard/history"]


class TestLogin:
    @pytest.mark.parametrize("path", PAGES)
    def test_page_without_token_redirects_to_login(self, farm: Farm, path: str) -> None:
        """A page asked for without a token is a 303 to the login, which comes back to it."""
        answer = farm.client.get(path, follow_redirects=False)
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/login?next=%2F")

    @pytest.mark.parametrize("path", DATA)
    def test_json_without_token_is_401(self, farm: Farm, path: str) -> None:
        """The JSON behind the pages refuses a request without a valid token."""
        assert farm.client.get(path).status_code == 401
        farm.client.cookies.set("farm_token", "farm_nonsense")
        assert farm.client.get(path).status_code == 401

    def test_wrong_token_is_refused_by_the_form(self, farm: Farm) -> None:
        """A token the store does not know gets the form again with 401 and no cookie."""
        answer = farm.client.post("/login", data={"token": "farm_wrong"}, follow_redirects=False)
        assert answer.status_code == 401
        assert "unknown or revoked token" in answer.text
        assert "set-cookie" not in answer.headers

    def test_login_sets_an_httponly_strict_cookie(self, farm: Farm) -> None:
        """A known token is kept in an HttpOnly, SameSite=Strict cookie and opens the pages."""
        answer = farm.client.post("/login", data={"token": farm.token, "next": "/queue"},
                                  follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/queue"
        cookie = answer.headers["set-cookie"]
        assert "farm_token=" in cookie and "HttpOnly" in cookie
        assert "samesite=strict" in cookie.lower()
        page = farm.client.get("/queue")
        assert page.status_code == 200
        assert '"running": "/api/v1/jobs?state=running' in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]

    def test_logout_forgets_the_cookie(self, farm: Farm) -> None:
        """After /logout the pages redirect to the login again."""
        farm.log_in(farm.token)
        assert farm.client.get("/", follow_redirects=False).status_code == 200
        farm.client.get("/logout")
        assert farm.client.get("/", follow_redirects=False).status_code == 303

    def test_revoked_token_no_longer_opens_pages(self, farm: Farm) -> None:
        """A token revoked after the login is refused at the next page."""
        farm.log_in(farm.token)
        alice = next(t for t in farm.store.list_tokens() if t.owner == "alice")
        farm.store.revoke_token(alice.id, T0)
        assert farm.client.get("/", follow_redirects=False).status_code == 303

    def test_actions_only_for_operators(self, farm: Farm) -> None:
        """The fleet page tells its script whether to show drain/undrain/release."""
        farm.log_in(farm.token)
        assert 'data-operator="false"' in farm.client.get("/").text
        farm.log_in(farm.operator)
        assert 'data-operator="true"' in farm.client.get("/").text

    @pytest.mark.parametrize(("asked", "kept"), [
        ("/queue", "/queue"), ("/jobs/3?x=1", "/jobs/3?x=1"), ("https://evil.example/", "/"),
        ("//evil.example/", "/"), ("/\\evil.example", "/"), ("", "/"), (None, "/"),
    ])
    def test_next_stays_on_this_site(self, asked: str | None, kept: str) -> None:
        """The login returns only to a path of this site (no open redirect)."""
        assert safe_next(asked) == kept


class TestStatic:
    def test_chart_js_is_shipped(self, farm: Farm) -> None:
        """Chart.js and the pages' scripts are served from the package, without a token."""
        for name in ("chart.umd.js", "dash.js", "fleet.js", "job.js", "dash.css"):
            assert farm.client.get(f"/static/{name}").status_code == 200, name
        assert "Chart.js v4" in farm.client.get("/static/chart.umd.js").text[:200]

    def test_favicon_is_served_without_a_token(self, farm: Farm) -> None:
        """``/favicon.ico``, which browsers ask for by themselves, is the icon, not a 404 or 401."""
        response = farm.client.get("/favicon.ico", follow_redirects=False)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("image/svg+xml")
        assert response.text.lstrip().startswith("<svg")


class TestViews:
    def test_fleet_lists_each_phone_with_its_incidents(self, farm: Farm) -> None:
        """The fleet page's sources list every phone (the API's devices) and its newest events,
        newest first."""
        put_state(farm.store, "P1", DeviceState.READY, "app registered", T0)
        put_state(farm.store, "P1", DeviceState.UNHEALTHY, "app died: am_crash",
                  T0 + timedelta(seconds=5))
        put_state(farm.store, "P2", DeviceState.READY, "app registered", T0)
        farm.log_in(farm.token)
        rows = {d["serial"]: d for d in farm.client.get("/api/v1/devices").json()}
        assert set(rows) == {"P1", "P2"}
        assert rows["P1"]["state"] == "unhealthy"
        incidents = farm.client.get("/api/v1/dashboard/incidents").json()
        assert set(incidents) == {"P1", "P2"}
        assert incidents["P1"][0]["reason"] == "app died: am_crash"
        assert len(incidents["P1"]) <= farm.settings.web.incidents

    @pytest.mark.parametrize("page", ["/", "/queue", "/jobs/1", "/history"])
    def test_every_source_of_a_page_answers(self, farm: Farm, page: str) -> None:
        """Each JSON route a page polls (the API's and the dashboard's) answers its cookie."""
        farm.store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        farm.log_in(farm.token)
        text = farm.client.get(page).text
        sources = json.loads(text.split("data-sources='", 1)[1].split("'", 1)[0])
        assert sources
        for url in sources.values():
            assert farm.client.get(url).status_code == 200, url

    def test_job_view_charts_the_trials_recorded(self, farm: Farm) -> None:
        """A tuning job's recorded trials come in order with the best so far; failed ones are
        None, and a half-written last line is left for the next read."""
        job_id = farm.store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        work_dir = tune_work_dir(farm.settings.data_dir, job_id)
        work_dir.mkdir(parents=True)
        lines = [[0, ["trace", [3e-4, 3e-4], "t", []]], [0, ["trace", [1e10], "t", []]],
                 [0, ["trace", [1e-4], "t", []]], [0, ["trace", [2e-4], "t", []]]]
        text = "".join(json.dumps(line) + "\n" for line in lines)
        (work_dir / RECORDS_FILE).write_text(text + '[0, ["trace", [1e-', encoding="utf-8")
        assert trial_run_s(work_dir) == [3e-4, None, 1e-4, 2e-4]
        assert views.trials_view(farm.settings.data_dir, job_id)["best_run_s"] == [
            3e-4, 3e-4, 1e-4, 1e-4]
        farm.log_in(farm.token)
        chart = farm.client.get(f"/api/v1/dashboard/jobs/{job_id}/trials").json()
        assert chart == {"trial_run_s": [3e-4, None, 1e-4, 2e-4],
                         "best_run_s": [3e-4, 3e-4, 1e-4, 1e-4]}
        assert farm.client.get("/api/v1/dashboard/jobs/99/trials").status_code == 404

    def test_unknown_job_is_404_with_farms_message(self, farm: Farm) -> None:
        """An unknown job id is a 404 whose message the page shows."""
        farm.log_in(farm.token)
        answer = farm.client.get("/api/v1/dashboard/jobs/99/trials")
        assert answer.status_code == 404
        assert "no job 99" in answer.text

    def test_a_tunes_bundle_downloads_once_its_library_exists(self, farm: Farm,
                                                              tmp_path: Path) -> None:
        """The export is offered only with the job's tuned library; the zip is farmctl export's."""
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        records = tmp_path / "db"
        records.mkdir()
        (records / WORKLOADS_FILE).write_text("")
        (records / RECORDS_FILE).write_text("")
        data_dir = Path(farm.settings.data_dir)
        job_id = model_tune_job(farm.store, farm.settings.database_url, data_dir, model, records,
                                {"kind": "llvm", "mtriple": "x86_64-linux-gnu"})
        farm.log_in(farm.token)
        state = farm.client.get(f"/api/v1/dashboard/jobs/{job_id}/export").json()
        assert state["available"] is False and TUNED_LIBRARY in state["reason"]
        answer = farm.client.get(f"/api/v1/dashboard/jobs/{job_id}/export.zip")
        assert answer.status_code == 404 and f"farmctl export {job_id}" in answer.text
        (tune_work_dir(data_dir, job_id) / TUNED_LIBRARY).write_bytes(b"\x7fELF library")
        state = farm.client.get(f"/api/v1/dashboard/jobs/{job_id}/export").json()
        assert state == {"available": True, "reason": ""}
        answer = farm.client.get(f"/api/v1/dashboard/jobs/{job_id}/export.zip")
        assert answer.status_code == 200
        assert f"job-{job_id}-bundle.zip" in answer.headers["content-disposition"]
        with zipfile.ZipFile(io.BytesIO(answer.content)) as bundle:
            names = set(bundle.namelist())
            assert {f"job-{job_id}-bundle/{name}" for name in (LIBRARY, MODEL, MANIFEST)} <= names
            assert bundle.read(f"job-{job_id}-bundle/{LIBRARY}") == b"\x7fELF library"
        assert farm.client.get("/api/v1/dashboard/jobs/99/export").json()["available"] is False

    def test_a_profiled_jobs_page_charts_each_phones_heaviest_kernels(self, farm: Farm) -> None:
        """The job page draws each phone's kernels as SVG bars, heaviest first and longest, even
        from a profile stored out of order; a job without a profile has no chart."""
        kernels = [{"name": "mean", "total_ms": 0.1, "share_pct": 10.0},
                   {"name": "fused_conv2d_add_relu", "total_ms": 0.8, "share_pct": 80.0},
                   {"name": "matmul", "total_ms": 0.1, "share_pct": 10.0}]
        profile = {"kernels": kernels, "kernels_ms": 1.0, "model_ms": 1.25, "ratio": 0.8}
        job_id = farm.store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        plain = farm.store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        for serial in ("P1", "P2"):
            put_state(farm.store, serial, DeviceState.READY, "test", T0)
        [claim] = farm.store.claim([Assignment(job_id, ("P1", "P2"), 60.0)], T0)
        runs = [{"serial": s, "profile": profile} for s in ("P1", "P2")]
        farm.store.finish(claim.attempt.id, Outcome({"kind": "model", "runs": runs},
                                                    [1e-3, 1e-3], "s", ("P1", "P2")), T0)
        farm.log_in(farm.token)
        page = farm.client.get(f"/jobs/{job_id}").text
        charts = page.split('<figure class="profile" data-serial="')[1:]
        assert [c.split('"', 1)[0] for c in charts] == ["P1", "P2"]
        for chart in charts:
            bars = [bar.split('"', 1)[0] for bar in chart.split('data-kernel="')[1:]]
            assert bars == ["fused_conv2d_add_relu", "mean", "matmul"]
            widths = [float(w.split('"', 1)[0]) for w in chart.split('width="')[2:]]
            assert widths[0] > 7 * widths[1] and "0.8000 ms (80.0%)" in chart
        assert "profile-section" not in farm.client.get(f"/jobs/{plain}").text

    def test_compare_of_unknown_jobs_is_400(self, farm: Farm) -> None:
        """A wrong side of a comparison is a 400 with farmctl compare's message."""
        farm.log_in(farm.token)
        answer = farm.client.get("/api/v1/dashboard/compare", params={"a": "1", "b": "x"})
        assert answer.status_code == 400
        assert "no job 1" in answer.text

    def test_history_of_an_unknown_workload(self, farm: Farm) -> None:
        """Without results, no workload is known and asking for one is the user's error."""
        assert views.history_view(farm.store, farm.settings, None)["workloads"] == []
        with pytest.raises(UserFault, match="no results of workload"):
            views.history_view(farm.store, farm.settings, "gemm n=1 float32")
