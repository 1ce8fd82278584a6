"""The dashboard's login, pages and JSON views in-process (no browser; see
tests/fleet/test_web_dashboard.py for the real one)."""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from device_states import put_state
from fastapi.testclient import TestClient
from stored_results import ab_job, ab_rounds
from tuned_jobs import model_tune_job, profiled_job

from farm.api.context import ApiContext
from farm.clock import FakeClock
from farm.config import Settings
from farm.demo_model import write_small_cnn
from farm.errors import UserFault
from farm.health.readings import declared
from farm.jobs.bundle import LIBRARY, MANIFEST, MODEL
from farm.jobs.tuning_db import RECORDS_FILE, WORKLOADS_FILE, trial_run_s
from farm.queue import DeviceState, Outcome, Store
from farm.queue.scheduler import Assignment
from farm.results.ab import ab_phones
from farm.serve.app import create_app
from farm.tuning import tune_work_dir
from farm.tuning.counters import TaskProgress
from farm.tuning.model import TUNED_LIBRARY
from farm.tuning.progress import TuneProgress
from farm.web import tune_view, views
from farm.web.login import safe_next
from farm.web.profile_chart import LINE_H_PX, NAME_CHARS, name_lines
from farm.web.render import TEMPLATES_DIR

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
DATA = ["/api/v1/dashboard/jobs/1/trials", "/api/v1/dashboard/jobs/1/speedups",
        "/api/v1/dashboard/jobs/1/ab",
        "/api/v1/dashboard/incidents", "/api/v1/dashboard/compare?a=1&b=2",
        "/api/v1/dashboard/history"]


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


    def test_pages_carry_no_inline_script(self) -> None:
        """No template has an inline script or event handler (``onsubmit="..."``): the pages'
        Content-Security-Policy (script-src 'self') refuses to run them, so the handler would
        be silently missing (the fleet filter's Enter reloaded the page)."""
        for template in sorted(TEMPLATES_DIR.glob("*.html")):
            text = template.read_text(encoding="utf-8")
            assert not re.search(r"\son[a-z]+\s*=", text), template.name
            assert not re.search(r"<script(?![^>]*\ssrc=)", text), template.name


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

    def test_readings_carry_their_declared_label_and_unit(self, farm: Farm) -> None:
        """A device's readings come with the label and unit its kind declares (``free storage``
        in MiB, not ``free_storage_mb``) for the pages to show, a name it does not declare
        (a newer farm's) marked unknown; every built-in reading declares a label of its own."""
        put_state(farm.store, "P1", DeviceState.READY, "app registered", T0)
        farm.store.record_health("P1", T0, {}, {"free_storage_mb": 87198.6,
                                                "battery_temp_c": 31.5, "fan_rpm": 900.0})
        farm.log_in(farm.token)
        [row] = farm.client.get("/api/v1/devices").json()
        shown = {v["name"]: (v["label"], v["unit"]) for v in row["values"]}
        assert shown == {"battery_temp_c": ("battery temp", "°C"),
                         "free_storage_mb": ("free storage", "MiB"),
                         "fan_rpm": ("fan rpm (unknown)", "")}
        for kind in ("android", "board", "gpu"):
            for reading in declared(kind).readings:
                assert reading.label and reading.label != reading.name, reading.name

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

    def test_job_view_charts_one_curve_per_task_heaviest_first(self, farm: Farm) -> None:
        """A tuning job's recorded trials come as one curve per task in tuning order (the
        heaviest first), each with its own best so far: a reshape's microseconds do not flatten
        a convolution's curve. Failed trials are None; a half-written last line is left for
        the next read; a workload no task names comes last by its index."""
        job_id = farm.store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        work_dir = tune_work_dir(farm.settings.data_dir, job_id)
        TuneProgress(work_dir).set_tasks([TaskProgress("fused_conv2d_add_relu", 1, 4, 0),
                                          TaskProgress("reshape", 0, 4, 0)])
        lines = [[1, ["trace", [3e-3, 3e-3], "t", []]], [0, ["trace", [2e-6], "t", []]],
                 [1, ["trace", [1e10], "t", []]], [2, ["trace", [5e-4], "t", []]],
                 [1, ["trace", [2e-3], "t", []]], [0, ["trace", [1e-6], "t", []]],
                 [1, ["trace", [4e-3], "t", []]]]
        text = "".join(json.dumps(line) + "\n" for line in lines)
        (work_dir / RECORDS_FILE).write_text(text + '[0, ["trace", [1e-', encoding="utf-8")
        assert trial_run_s(work_dir) == {1: [3e-3, None, 2e-3, 4e-3], 0: [2e-6, 1e-6],
                                         2: [5e-4]}
        farm.log_in(farm.token)
        chart = farm.client.get(f"/api/v1/dashboard/jobs/{job_id}/trials").json()
        assert chart == {"tasks": [
            {"name": "fused_conv2d_add_relu", "workload_index": 1,
             "trial_run_s": [3e-3, None, 2e-3, 4e-3], "best_run_s": [3e-3, 3e-3, 2e-3, 2e-3]},
            {"name": "reshape", "workload_index": 0, "trial_run_s": [2e-6, 1e-6],
             "best_run_s": [2e-6, 1e-6]},
            {"name": "workload 2", "workload_index": 2, "trial_run_s": [5e-4],
             "best_run_s": [5e-4]}], "tasks_tuned": 3, "trials": 7}
        heaviest = tune_view.trials_view(farm.store, farm.settings.data_dir, job_id, curves=1)
        assert [t["name"] for t in heaviest["tasks"]] == ["fused_conv2d_add_relu"]
        assert heaviest["tasks_tuned"] == 3
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

    def test_a_finished_tunes_speedup_per_phone(self, farm: Farm, tmp_path: Path) -> None:
        """A model tune's speed-up per phone comes from its runs' untuned and tuned timings, as
        a GEMM tune's does (with its GFLOPS); a job without them has no phone."""
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        data_dir = Path(farm.settings.data_dir)
        tuned = model_tune_job(farm.store, farm.settings.database_url, data_dir, model, None,
                               {"kind": "llvm", "mtriple": "x86_64-linux-gnu"})
        gemm = farm.store.enqueue({"kind": "tune", "params": {"gemm": {"n": 64}, "trials": 4}},
                                  T0)
        [claim] = farm.store.claim([Assignment(gemm, ("R1",), 60.0)], T0)
        run = {"serial": "R1", "untuned_samples_s": [3e-3, 3e-3], "tuned_samples_s": [1e-3, 2e-3],
               "speedup": 2.0, "tuned_gflops": 0.35, "threads": None}
        farm.store.finish(claim.attempt.id, Outcome(
            {"kind": "tune", "runs": [run], "per_serial": {"R1": {
                "speedup": 2.0, "tuned_gflops": 0.35, "tuned_median_s": 1.5e-3}}},
            [1e-3, 2e-3], "s", ("R1", "R1")), T0)
        farm.log_in(farm.token)
        assert farm.client.get(f"/api/v1/dashboard/jobs/{tuned}/speedups").json() == {
            "phones": [{"serial": "R1", "untuned_median_s": 4e-5, "tuned_median_s": 2e-5,
                        "speedup": 2.0, "tuned_gflops": None}], "best_note": None}
        assert farm.client.get(f"/api/v1/dashboard/jobs/{gemm}/speedups").json()["phones"] == [
            {"serial": "R1", "untuned_median_s": 3e-3, "tuned_median_s": 1.5e-3,
             "speedup": 2.0, "tuned_gflops": 0.35}]
        plain = farm.store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        assert farm.client.get(f"/api/v1/dashboard/jobs/{plain}/speedups").json() == {
            "phones": [], "best_note": None}
        assert farm.client.get("/api/v1/dashboard/jobs/99/speedups").status_code == 404

    def test_a_profiled_jobs_page_charts_each_phones_heaviest_kernels(self, farm: Farm) -> None:
        """The job page draws each phone's kernels as SVG bars, heaviest first and longest, even
        from a profile stored out of order; a job without a profile has no chart."""
        kernels = [{"name": "mean", "total_ms": 0.1, "share_pct": 10.0},
                   {"name": "fused_conv2d_add_relu", "total_ms": 0.8, "share_pct": 80.0},
                   {"name": "matmul", "total_ms": 0.1, "share_pct": 10.0}]
        job_id = profiled_job(farm.store, kernels)
        plain = farm.store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
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

    def test_a_profile_chart_shows_whole_kernel_names(self, farm: Farm) -> None:
        """Kernel names longer than the name column are wrapped whole after their underscores,
        one row as high as its lines, with the name as the bar's tooltip: two kernels that
        differ only at the start no longer read the same."""
        long = "_cast_multiply_add_right_shift_cast_clip_cast_1"
        names = [f"tvmgen_default_fused_nn_conv2d_add{long}",
                 f"tvmgen_default_fused_nn_dense{long}"]
        job_id = profiled_job(farm.store, [{"name": n, "total_ms": ms, "share_pct": 50.0}
                                           for n, ms in zip(names, (0.6, 0.4), strict=True)])
        farm.log_in(farm.token)
        page = farm.client.get(f"/jobs/{job_id}").text
        chart = page.split('<figure class="profile" data-serial="')[1]
        bars = re.findall(r'<g class="kernel-bar" data-kernel="([^"]+)".*?<title>([^<]+)</title>'
                          r'.*?<text class="kernel-name"[^>]* y="([\d.]+)"[^>]*>(.*?)</text>',
                          chart, re.DOTALL)
        assert [b[0] for b in bars] == names
        for name, title, _y, text in bars:
            lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", text)
            assert "".join(lines) == name and len(lines) > 1, lines
            assert all(len(line) <= NAME_CHARS for line in lines), lines
            assert title.startswith(name + ":")
        first_lines = len(name_lines(names[0]))
        assert float(bars[1][2]) - float(bars[0][2]) >= first_lines * LINE_H_PX

    def test_an_ab_jobs_verdicts_and_ratio_of_each_round(self, farm: Farm) -> None:
        """An A/B job's page data: its sides and threshold, each phone's verdict row as farmctl
        prints it, and every round's A and B timings, their ratio B/A and the reading taken last
        before the round; other jobs have no phone, an unknown one is a 404."""
        taken = {"P1": ab_rounds(1, 1.10), "P2": ab_rounds(3, 1.0)}
        job_id = ab_job(farm.store, taken, temps_c={"P1": [30.0, 32.0], "P2": []})
        plain = farm.store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        farm.log_in(farm.token)
        page = farm.client.get(f"/jobs/{job_id}").text
        assert 'id="ab-section"' in page and '<script src="/static/ab.js">' in page
        view = farm.client.get(f"/api/v1/dashboard/jobs/{job_id}/ab").json()
        assert (view["a"], view["b"], view["threshold"]) == (
            "gemm n=64 float32", "gemm n=72 float32", 0.05)
        [summary] = farm.store.results(job_id)
        assert [{k: v for k, v in p.items() if k != "per_round"} for p in view["phones"]] == \
            ab_phones(summary.summary)
        assert [p["verdict"] for p in view["phones"]] == ["slower", "no change"]
        for phone in view["phones"]:
            rounds = taken[phone["serial"]]
            assert [(r["round"], r["a_s"], r["b_s"]) for r in phone["per_round"]] == [
                (i, a, b) for i, (a, b) in enumerate(rounds)]
            assert [r["ratio"] for r in phone["per_round"]] == pytest.approx(
                [b / a for a, b in rounds])
        p1, p2 = (p["per_round"] for p in view["phones"])
        assert [r["battery_temp_c"] for r in p1] == [30.0] * 10 + [32.0] * 10
        assert {r["battery_temp_c"] for r in p2} == {None}
        assert farm.client.get(f"/api/v1/dashboard/jobs/{plain}/ab").json()["phones"] == []
        answer = farm.client.get("/api/v1/dashboard/jobs/99/ab")
        assert answer.status_code == 404 and "no job 99" in answer.text

    def test_an_ab_summary_of_another_version_is_no_error(self, farm: Farm) -> None:
        """Figures JSON cannot carry (NaN, infinity), a side that is no text and a round that
        lacks B come as None, not as an error: the page shows what there is."""
        job_id = farm.store.enqueue({"kind": "ab", "params": {"a": {"job": 1},
                                                             "b": {"job": 2}}}, T0)
        put_state(farm.store, "P1", DeviceState.READY, "test", T0)
        [claim] = farm.store.claim([Assignment(job_id, ("P1",), 60.0)], T0)
        summary = {"kind": "ab", "a": {"odd": 1}, "b": "x", "threshold": "5%",
                   "per_serial": {"P1": {"ratio": float("nan"), "ci_low": float("inf")},
                                  "P2": "not a mapping"}}
        assert farm.store.finish(claim.attempt.id, Outcome(
            summary, [0.01, float("inf"), 0.02], "s", ["P1"] * 3, sample_arms=["a", "b", "a"],
            sample_rounds=[0, 0, 1]), T0)
        farm.log_in(farm.token)
        answer = farm.client.get(f"/api/v1/dashboard/jobs/{job_id}/ab")
        assert answer.status_code == 200, answer.text
        view = answer.json()
        assert (view["a"], view["b"], view["threshold"]) == (None, "x", None)
        [phone] = view["phones"]
        assert (phone["serial"], phone["ratio"], phone["ci_low"]) == ("P1", None, None)
        assert phone["per_round"] == [
            {"round": 0, "a_s": 0.01, "b_s": None, "ratio": None, "battery_temp_c": None,
             "thermal_status": None},
            {"round": 1, "a_s": 0.02, "b_s": None, "ratio": None, "battery_temp_c": None,
             "thermal_status": None}]

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
