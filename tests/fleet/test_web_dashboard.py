"""The dashboard in a real headless browser against farmd with virtual phones (issue 16).

Debian's chromium and chromium-driver through selenium (:mod:`farm.web.testing`);
skipped only when they are missing. Every wait is on a condition (WebDriverWait
or :func:`farm.clock.wait_until`). Screenshots of every page go to
``test-results/screenshots/`` at the repository root (git-ignored); the test
prints the folder.
"""

from __future__ import annotations

import contextlib
import http.server
import re
import threading
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from device_states import put_state
from stored_results import ab_job, ab_rounds
from tuned_jobs import model_tune_job, profiled_job

from farm.api.context import ApiContext
from farm.clock import wait_until
from farm.config import Settings
from farm.queue.models import DeviceState, JobState
from farm.queue.store import Store
from farm.serve.server import ApiServer
from farm.web.testing import browser_missing, headless_chromium

pytestmark = [pytest.mark.fleet, pytest.mark.skipif(browser_missing() is not None,
                                                   reason=browser_missing() or "")]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-results" / "screenshots"
PAGE_WAIT_S = 60.0
CRASH_SEEN_S = 120.0
TUNE_DEADLINE_S = 600.0
#: Two batches of four: the chart shows the first and grows by the second while the page is
#: open (a third batch showed nothing more, and cost 40-50 s at load 8).
TRIALS = 8


EVIL_FORM = """<!doctype html><form id="f" method="post" action="{action}"
 enctype="application/x-www-form-urlencoded"><input name="reason" value="pwned"></form>
<script>document.getElementById("f").submit();</script>"""


@contextlib.contextmanager
def other_origin(root: Path) -> Iterator[str]:
    """A plain web server over ``root`` on another port of this host: the same site as the
    farm (SameSite=Strict still sends its cookie), another origin. Yields its URL."""
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(root))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def tune_spec() -> dict[str, Any]:
    """A MetaSchedule tuning job of a 64x64 GEMM over two phones, batches of four trials
    (tests/fleet/test_jobs_tuning.py's spec: two batches, so the chart grows once)."""
    return {"kind": "tune", "attempts": 3,
            "params": {"gemm": {"n": 64, "number": 2, "repeat": 3}, "trials": TRIALS,
                       "trials_per_batch": 4, "phones": 2}}


@contextlib.contextmanager
def api_server(store: Store, settings: Settings) -> Iterator[ApiServer]:
    """The API app (with the dashboard) over ``store`` on a free loopback port."""
    server = ApiServer(ApiContext(store=store, settings=settings), "127.0.0.1", 0)
    server.start()
    try:
        yield server
    finally:
        server.stop()


#: The browser's window, as :func:`farm.web.testing.headless_chromium` opens it.
WINDOW = (1280, 900)


@pytest.fixture(scope="module")
def chromium_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of this file's one chromium: its profile and its downloads."""
    return tmp_path_factory.mktemp("chromium")


@pytest.fixture(scope="module")
def chromium(chromium_dir: Path) -> Iterator[Any]:
    """One headless chromium for this file's tests, ended after the last.

    Its start took 5-13 s at load 8-12 on 2 cores, once per test before.
    """
    with headless_chromium(chromium_dir, width=WINDOW[0], height=WINDOW[1]) as driver:
        yield driver


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """The file's chromium as a fresh one comes: a blank page, no cookie, its first size.

    Each test's farm is on its own port; cookies are kept per host, not per
    port, so all of them are cleared (CDP's ``Network.clearBrowserCookies``:
    selenium's ``delete_all_cookies`` clears the open page's only). Storage is
    per origin, so per test.
    """
    chromium.get("about:blank")
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})
    chromium.set_window_size(*WINDOW)
    yield chromium
    chromium.get("about:blank")
    chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})


@pytest.fixture
def shoot(browser: Any, request: pytest.FixtureRequest) -> Callable[[str], Path]:
    """``shoot(name)`` saves the browser's whole page as ``<test>-<name>.png`` in SCREENSHOTS."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {SCREENSHOTS}")  # noqa: T201 - the brief asks the run to say where

    def save(name: str) -> Path:
        path = SCREENSHOTS / f"{request.node.name}-{name}.png"
        size = browser.get_window_size()
        height = int(browser.execute_script("return document.documentElement.scrollHeight"))
        browser.set_window_size(size["width"], min(max(height + 140, size["height"]), 6000))
        try:
            assert browser.save_screenshot(str(path)), f"no screenshot {path}"
        finally:
            browser.set_window_size(size["width"], size["height"])
        return path

    return save


def wait(browser: Any, condition: Callable[[Any], Any], what: str,
         timeout_s: float = PAGE_WAIT_S) -> Any:
    """WebDriverWait until ``condition(browser)`` is truthy; its value."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout_s, poll_frequency=0.2,
                         ignored_exceptions=(StaleElementReferenceException,)).until(
        condition, f"timed out waiting for {what}")


def css(browser: Any, selector: str) -> list[Any]:
    """Elements matching a CSS selector (possibly none)."""
    from selenium.webdriver.common.by import By

    return list(browser.find_elements(By.CSS_SELECTOR, selector))


def log_in(browser: Any, base: str, token: str, page: str = "/") -> None:
    """Log in through the form, coming from ``page``; waits until the page is shown."""
    browser.get(base + page)
    wait(browser, lambda b: "/login" in b.current_url, "the redirect to the login")
    [field] = css(browser, "#token")
    field.send_keys(token)
    css(browser, "#login button")[0].click()
    wait(browser, lambda b: "/login" not in b.current_url, "the page after the login")


class TestRefused:
    def test_requests_without_a_valid_token_are_refused(
        self, tmp_path: Path, browser: Any, shoot: Callable[[str], Path]
    ) -> None:
        """Without a token the JSON answers 401 and pages redirect to /login; a wrong token is
        refused by the form; a right one opens the page asked for."""
        settings = Settings.model_validate({"data_dir": str(tmp_path / "farm")})
        store = Store(settings.database_url)
        try:
            token = store.create_token("alice", datetime.now(UTC))
            with api_server(store, settings) as server:
                base = server.url
                for path in ("/api/v1/devices", "/api/v1/jobs", "/api/v1/dashboard/incidents",
                             "/api/v1/dashboard/jobs/1/trials", "/api/v1/dashboard/history"):
                    assert httpx.get(base + path).status_code == 401, path
                    assert httpx.get(base + path, headers={"Authorization": "Bearer nope"},
                                     cookies={"farm_token": "nope"}).status_code == 401, path
                for path in ("/", "/queue", "/jobs/1", "/compare?a=1&b=2", "/history"):
                    answer = httpx.get(base + path, follow_redirects=False)
                    assert answer.status_code == 303, path
                    assert answer.headers["location"].startswith("/login?next="), path

                browser.get(base + "/queue")
                wait(browser, lambda b: "/login" in b.current_url, "the redirect to the login")
                shoot("login")
                css(browser, "#token")[0].send_keys("not-a-token")
                css(browser, "#login button")[0].click()
                error = wait(browser, lambda b: css(b, "#login-error"), "the login's refusal")
                assert "unknown or revoked token" in error[0].text
                assert "/login" in browser.current_url
                shoot("login-refused")

                css(browser, "#token")[0].send_keys(token)
                css(browser, "#login button")[0].click()
                wait(browser, lambda b: b.current_url.endswith("/queue"), "the queue page")
                wait(browser, lambda b: css(b, "#ended tr.empty"), "the queue's tables")
                cookie = browser.get_cookie("farm_token")
                assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
                # Scripts on the page cannot read the token.
                assert "farm_token" not in browser.execute_script("return document.cookie")

                browser.get(base + "/logout")
                wait(browser, lambda b: "/login" in b.current_url, "the login after logging out")
                browser.get(base + "/")
                wait(browser, lambda b: "/login" in b.current_url, "the login again")
        finally:
            store.close()


def incidents_text(browser: Any, serial: str) -> str:
    """The fleet page's last-incidents cell of ``serial`` ('' while not shown)."""
    cells = css(browser, f'tr[data-serial="{serial}"] td.c-incidents')
    return cells[0].text if cells else ""


class TestCrossSite:
    def test_buttons_work_and_a_cross_origin_form_is_refused(
        self, tmp_path: Path, browser: Any, shoot: Callable[[str], Path]
    ) -> None:
        """The operator's drain and undrain buttons work (the pages send X-Farm-CSRF); a form
        on another port of the farm's host that posts a drain with the operator's cookie is
        refused with 403, and the phone stays in service."""
        settings = Settings.model_validate({"data_dir": str(tmp_path / "farm")})
        store = Store(settings.database_url)
        serial = "10.0.0.7:5555/usb"
        try:
            put_state(store, serial, DeviceState.READY, "app registered", datetime.now(UTC))
            token = store.create_token("ops", datetime.now(UTC), operator=True)
            (tmp_path / "evil").mkdir()
            with api_server(store, settings) as server, other_origin(tmp_path / "evil") as evil:
                log_in(browser, server.url, token)
                drain_and_undrain(browser, store, serial, shoot)
                action = f"{server.url}/api/v1/devices/{serial.replace('/', '%2F')}/drain"
                (tmp_path / "evil" / "index.html").write_text(EVIL_FORM.format(action=action))
                browser.get(evil + "/index.html")
                wait(browser, lambda b: b.current_url.startswith(server.url), "the form's post")
                answer = wait(browser, lambda b: "refused" in b.page_source and b.page_source,
                              "the refusal")
                assert "cross-site request from " + evil in answer
                assert not store.get_device(serial).drained  # type: ignore[union-attr]
                status = browser.execute_script(
                    "return performance.getEntriesByType('navigation')[0].responseStatus")
                assert status in (403, None), status  # None: chromium too old to tell
        finally:
            store.close()


#: Readings of the phones of TestFinishedWork, and how the fleet page must show them.
READINGS = {"battery_pct": 81, "battery_temp_c": 31.5, "thermal_status": 0,
            "max_zone_temp_c": 38.2, "free_storage_mb": 87198.6}
READINGS_SHOWN = {"battery": "81 %", "battery temp": "31.5 °C", "thermal status": "0 none",
                  "hottest zone": "38.2 °C", "free storage": "87198.6 MiB"}
#: A model tune's tasks, heaviest first, with their records: (workload index, run time s).
TASKS = ["fused_conv2d_add_relu", "fused_matmul_add", "reshape"]
RECORDS = [(1, 3e-3), (0, 2e-6), (2, 4e-4), (1, 2e-3), (0, 1e-6), (2, 3e-4), (1, 2.5e-3)]
#: Two kernels whose names differ at the start only, longer than the chart's name column.
KERNELS = [f"tvmgen_default_fused_nn_{op}_cast_multiply_add_right_shift_cast_clip_1"
           for op in ("conv2d_add", "dense_add")]


def finished_model_tune(store: Store, settings: Settings, tmp_path: Path) -> int:
    """A finished model tune (tests/tuned_jobs.py) with the records of three tasks, its
    progress naming them heaviest first, and its tuned library (so its bundle downloads)."""
    from farm.demo_model import write_small_cnn
    from farm.jobs.tuning_db import RECORDS_FILE, WORKLOADS_FILE
    from farm.tuning import tune_work_dir
    from farm.tuning.counters import TaskProgress
    from farm.tuning.model import TUNED_LIBRARY
    from farm.tuning.progress import TuneProgress

    data_dir = Path(settings.data_dir)
    model = write_small_cnn(tmp_path / "small_cnn.onnx")
    job_id = model_tune_job(store, settings.database_url, data_dir, model, None,
                            {"kind": "llvm", "mtriple": "x86_64-linux-gnu"})
    work_dir = tune_work_dir(data_dir, job_id)
    (work_dir / WORKLOADS_FILE).write_text("")
    (work_dir / RECORDS_FILE).write_text("".join(
        f'[{index}, ["trace", [{run_s}], "target", []]]\n' for index, run_s in RECORDS))
    TuneProgress(work_dir).set_tasks([TaskProgress(name, index, 3, 3)
                                      for index, name in ((1, TASKS[0]), (2, TASKS[1]),
                                                          (0, TASKS[2]))])
    (work_dir / TUNED_LIBRARY).write_bytes(b"\x7fELF library")
    return job_id


class TestFinishedWork:
    def test_fleet_filter_readings_a_model_tunes_page_and_kernel_names(
        self, tmp_path: Path, browser: Any, chromium_dir: Path, shoot: Callable[[str], Path]
    ) -> None:
        """Enter in the fleet filter keeps the page and the filter; readings show as labelled
        values with units; a finished model tune's page shows its speed-up per phone, a curve
        per task (heaviest first) and an export link that downloads its bundle; a profile
        chart shows each kernel's whole name; an A/B job's page shows its sides, each phone's
        verdict and a chart of its rounds' ratios B/A against the threshold band."""
        from farm.jobs.bundle import LIBRARY, MANIFEST, MODEL
        from farm.web.testing import DOWNLOADS

        settings = Settings.model_validate({"data_dir": str(tmp_path / "farm")})
        store = Store(settings.database_url)
        try:
            tuned = finished_model_tune(store, settings, tmp_path)
            profiled = profiled_job(store, [{"name": name, "total_ms": ms, "share_pct": 50.0}
                                            for name, ms in zip(KERNELS, (0.6, 0.4),
                                                                strict=True)])
            ab = ab_job(store, {"P1": ab_rounds(1, 1.10), "P2": ab_rounds(3, 1.0)},
                        temps_c={"P1": [30.0, 33.5]})
            serials = ["R1", "P1", "P2"]
            for serial in serials:
                store.record_health(serial, datetime.now(UTC), {}, READINGS)
            token = store.create_token("alice", datetime.now(UTC))
            with api_server(store, settings) as server:
                base = server.url
                log_in(browser, base, token)
                wait(browser, lambda b: len(css(b, "#fleet tbody tr[data-serial]")) == 3,
                     "every phone")
                readings_shown(browser, "R1")
                press_enter_in_filter(browser, "P2")
                wait(browser, lambda b: [r.get_attribute("data-serial") for r in css(
                    b, "#fleet tbody tr[data-serial]")] == ["P2"], "only the filtered phone")
                shoot("fleet-filtered")
                browser.set_window_size(390, 844)  # a phone's screen: the row is a card
                wait(browser, lambda b: css(b, 'tr[data-serial="P2"] td.c-readings dd'),
                     "the card's readings")
                shoot("fleet-phone-screen")
                browser.set_window_size(1280, 900)

                browser.get(f"{base}/jobs/{tuned}")
                assert speedup_cells(browser) == {"R1": "\u00d72.00"}  # the multiplication sign
                curves = wait(browser, chart_curves, "the tuning curves")
                assert [c["name"] for c in curves] == TASKS
                assert curves[0]["best_ms"] == pytest.approx([3.0, 2.0, 2.0])
                assert chart_points(browser) == len(RECORDS)
                shoot("model-tune")
                link = wait(browser, lambda b: css(b, "#export-download"), "the export link")[0]
                link.click()
                bundle = chromium_dir / DOWNLOADS / f"job-{tuned}-bundle.zip"
                wait_until(bundle.is_file, PAGE_WAIT_S, f"{bundle.name} downloaded")
                with zipfile.ZipFile(bundle) as archive:
                    names = set(archive.namelist())
                assert {f"job-{tuned}-bundle/{n}" for n in (LIBRARY, MODEL, MANIFEST)} <= names

                browser.get(f"{base}/jobs/{profiled}")
                kernel_names_whole(browser)
                shoot("profile")

                browser.get(f"{base}/jobs/{ab}")
                ab_page(browser, {"P1": "slower", "P2": "no change"}, rounds=20,
                        temps_c={"P1": {"30.0", "33.5"}, "P2": {""}})
                shoot("ab")
        finally:
            store.close()


def readings_shown(browser: Any, serial: str) -> None:
    """The fleet row's readings: each its kind's label beside its value and unit, one a line,
    its description as the tooltip."""
    cell = f'tr[data-serial="{serial}"] td.c-readings'
    wait(browser, lambda b: css(b, f"{cell} dd"), f"{serial}'s readings")
    labels = [e.text for e in css(browser, f"{cell} dt")]
    values = [e.text for e in css(browser, f"{cell} dd")]
    assert dict(zip(labels, values, strict=True)) == READINGS_SHOWN
    tops = [e.rect["y"] for e in css(browser, f"{cell} dt")]
    assert tops == sorted(tops) and len(set(tops)) == len(tops), tops  # one reading a line
    free = css(browser, f'{cell} dd[data-reading="free_storage_mb"]')[0]
    assert "free space on /data" in (free.get_attribute("title") or "")


def kernel_names_whole(browser: Any) -> None:
    """Every kernel bar's name is whole on the page: its text is the kernel's name and starts
    inside the chart (nothing cut off at the left), and it is the bar's tooltip."""
    wait(browser, lambda b: css(b, "figure.profile g.kernel-bar"), "the profile chart")
    bars = browser.execute_script(
        "return [...document.querySelectorAll('figure.profile g.kernel-bar')].map((g) => {"
        " const text = g.querySelector('text.kernel-name');"
        " return {kernel: g.dataset.kernel, text: text.textContent.trim(),"
        " left: text.getBBox().x, tip: g.querySelector('title').textContent}; });")
    assert [b["kernel"] for b in bars] == KERNELS * 2  # two phones
    for bar in bars:
        assert bar["text"] == bar["kernel"], bar
        assert bar["left"] >= 0, bar
        assert bar["tip"].startswith(bar["kernel"]), bar


def ab_page(browser: Any, verdicts: dict[str, str], rounds: int,
            temps_c: dict[str, set[str]]) -> None:
    """An A/B job's page: both sides named, a row per phone with its verdict and ratio, and per
    phone a chart of every round's ratio B/A with the median, its interval and the band
    1 ± threshold drawn at the job's threshold (Chart.js's own data); unfolded, each round's
    timings with the phone's battery temperature before it; each build's spread is named by
    its phone and side."""
    rows = wait(browser, lambda b: {r.get_attribute("data-serial"): r.find_element(
        "css selector", ".verdict").text for r in css(b, "#ab-phones tr[data-serial]")},
        "the A/B verdicts")
    assert rows == verdicts
    sides = [e.text for e in css(browser, "#ab-sides dd")]
    assert sides == ["gemm n=64 float32", "gemm n=72 float32"]
    charts = wait(browser, lambda b: b.execute_script(
        "return [...document.querySelectorAll('#ab-charts canvas')].map((c) => {"
        " const chart = Chart.getChart(c); if (!chart) return null;"
        " const sets = chart.data.datasets;"
        " const at = (key) => sets.filter((d) => d[key]).map((d) => d.data.map((p) => p.y));"
        " return {serial: c.dataset.serial, rounds: sets.find((d) => d.rounds).data.length,"
        " band: at('band'), ci: at('ci'), median: at('median')[0]}; })"
        ".filter((c) => c !== null);"), "the ratio charts")
    assert [c["serial"] for c in charts] == list(verdicts)
    ratios = {r.get_attribute("data-serial"): float(r.find_element(
        "css selector", ".ratio").text) for r in css(browser, "#ab-phones tr[data-serial]")}
    for chart in charts:
        assert chart["rounds"] == rounds, chart
        assert [y for line in chart["band"] for y in line] == pytest.approx(
            [0.95, 0.95, 1.05, 1.05]), chart
        low, high = chart["ci"]
        assert low[0] <= chart["median"][0] <= high[0], chart
        assert chart["median"][0] == pytest.approx(ratios[chart["serial"]], abs=5e-4)
    spreads = wait(browser, lambda b: [r.find_element("css selector", "td").text
                                       for r in css(b, "#phones tbody tr")], "the spreads")
    assert spreads == [f"{serial} {side}" for serial in verdicts for side in "AB"]
    for serial, shown in temps_c.items():
        figure = f'figure.ab-phone[data-serial="{serial}"]'
        css(browser, f"{figure} summary")[0].click()
        cells = wait(browser, lambda b, f=figure: [r.find_elements("css selector", "td")
                                                   for r in css(b, f"{f} tbody tr")], "rounds")
        assert len(cells) == rounds and {row[4].text for row in cells} == shown


def drain_and_undrain(browser: Any, store: Store, serial: str,
                      shoot: Callable[[str], Path]) -> None:
    """Press drain on the fleet page, see it drained, then undrain it the same way."""
    state_cell = f'tr[data-serial="{serial}"] td.c-state'
    wait(browser, lambda b: press(b, serial, "drain"), "the drain button")
    wait(browser, lambda b: "drained" in css(b, state_cell)[0].text, "the phone drained")
    assert store.get_device(serial).drained  # type: ignore[union-attr]
    shoot("fleet-drained")
    wait(browser, lambda b: press(b, serial, "undrain"), "the undrain button")
    wait(browser, lambda b: "drained" not in css(b, state_cell)[0].text, "the phone undrained")
    assert not store.get_device(serial).drained  # type: ignore[union-attr]


def press(browser: Any, serial: str, action: str) -> bool:
    """Click the fleet page's ``action`` button of ``serial``; False while it is not shown."""
    buttons = css(browser, f'tr[data-serial="{serial}"] button[data-action="{action}"]')
    if not buttons:
        return False
    buttons[0].click()
    return True


def filter_and_group(browser: Any, serials: list[str]) -> None:
    """The fleet page's filter keeps the matching phone only; grouping by model heads one group."""
    box = css(browser, "#filter")[0]
    press_enter_in_filter(browser, serials[1])
    wait(browser, lambda b: [r.get_attribute("data-serial")
                             for r in css(b, "#fleet tbody tr[data-serial]")] == [serials[1]],
         "only the filtered phone")
    box.clear()
    box.send_keys(" ")  # clear() sends no input event
    wait(browser, lambda b: len(css(b, "#fleet tbody tr[data-serial]")) == len(serials),
         "every phone again")
    browser.execute_script(
        "const s = document.getElementById('group-by'); s.value = 'model';"
        "s.dispatchEvent(new Event('change'));")
    groups = wait(browser, lambda b: css(b, "#fleet tbody tr.group"), "a model group")
    assert len(groups) == 1 and f"({len(serials)})" in groups[0].text  # one model, both phones
    browser.execute_script(
        "const s = document.getElementById('group-by'); s.value = '';"
        "s.dispatchEvent(new Event('change'));")


def check_speedups(browser: Any, job_id: int, serials: list[str]) -> None:
    """A finished GEMM tune's page shows each phone's tuned/untuned speed-up, and why it has
    no bundle to export (only a model tune has one)."""
    cells = speedup_cells(browser)
    assert sorted(cells) == sorted(serials), cells
    assert all(re.fullmatch(r"\D\d+\.\d\d", text) for text in cells.values()), cells
    assert f"job {job_id} is a tune job, not a tune of a model" in css(browser, "#export")[0].text


def speedup_cells(browser: Any) -> dict[str, str]:
    """The job page's speed-up per phone (serial -> "\u00d72.00"), once shown."""
    return dict(wait(browser, lambda b: {r.get_attribute("data-serial"): r.find_element(
        "css selector", ".speedup").text for r in css(b, "#speedups tr[data-serial]")},
        "the speed-up per phone"))


def press_enter_in_filter(browser: Any, text: str) -> None:
    """Type ``text`` and Enter in the fleet page's filter; the page must handle the form's
    submit itself (a reload of "/?" would clear the filter): checked by a listener on the
    window, which sees the submit after the page's own (sessionStorage outlives a reload)."""
    from selenium.webdriver.common.keys import Keys

    url = browser.current_url
    browser.execute_script(
        "sessionStorage.removeItem('submitted'); window.sameDocument = true;"
        "window.addEventListener('submit', (e) => "
        "sessionStorage.setItem('submitted', String(e.defaultPrevented)));")
    css(browser, "#filter")[0].send_keys(text + Keys.ENTER)
    handled = wait(browser, lambda b: b.execute_script(
        "return sessionStorage.getItem('submitted')"), "the filter's submit")
    assert handled == "true", "Enter in the filter submitted the form: the page reloads"
    assert browser.execute_script("return window.sameDocument === true"), "the page reloaded"
    assert browser.current_url == url
    assert css(browser, "#filter")[0].get_attribute("value") == text


def device_page(browser: Any, base: str, serial: str, event_state: str) -> None:
    """The device page, reached from its fleet row: readings over time, events, logcat's tail."""
    link = css(browser, f'tr[data-serial="{serial}"] td.serial a')[0].get_attribute("href")
    assert link == f"{base}/devices/{quote(serial, safe='')}", link
    browser.get(link)
    wait(browser, lambda b: css(b, "#device-facts dd"), "the device page")
    assert serial in css(browser, "h1")[0].text
    wait(browser, lambda b: int(css(b, "#readings-chart")[0].get_attribute("data-points")) >= 1,
         "readings over time")
    wait(browser, lambda b: any(event_state in r.text for r in css(b, "#events tbody tr")),
         "the crash's event")
    wait(browser, lambda b: css(b, "#log")[0].text.strip(), "the tail of its logcat")
    assert "logcat" in css(browser, "#log-source")[0].text


def chart_points(browser: Any) -> int:
    """Trials drawn in the job page's tuning chart (Chart.js's own data, 0 before it exists)."""
    return int(browser.execute_script(
        "const c = Chart.getChart('tuning-chart'); return c ? c.data.datasets"
        ".filter((d) => d.trials).reduce((n, d) => n + d.data.length, 0) : 0;"))


def chart_curves(browser: Any) -> list[dict[str, Any]]:
    """The tuning chart's curves: each task's name and its best so far in ms, in order."""
    return list(browser.execute_script(
        "const c = Chart.getChart('tuning-chart'); return c ? c.data.datasets"
        ".filter((d) => !d.trials).map((d) => ({name: d.label, best_ms: d.data.map((p) => p.y)}))"
        " : [];"))


class TestLiveFleet:
    @pytest.mark.slow
    def test_fleet_shows_a_crash_and_a_tuning_chart_grows(
        self, start_farmd: Callable[..., Any], browser: Any, shoot: Callable[[str], Path]
    ) -> None:
        """The fleet page lists each phone and changes when one's app is crashed; a running
        tuning job's chart grows without a reload; queue, results, compare and history show."""
        farm = start_farmd(2, same_model=True)
        store: Store = farm.store
        token = store.create_token("ops", datetime.now(UTC), operator=True)
        with api_server(store, farm.farmd.settings) as server:
            base = server.url
            log_in(browser, base, token)
            for serial in farm.serials:
                row = f'tr[data-serial="{serial}"][data-state="ready"]'
                wait(browser, lambda b, row=row: css(b, row), f"{serial} shown ready")
            assert css(browser, 'button[data-action="drain"]'), "operators get the drain button"
            shoot("fleet")
            filter_and_group(browser, farm.serials)

            # A crash of the TVM RPC app shows on the page: the phone's incidents change.
            crashed = farm.serials[0]
            before = incidents_text(browser, crashed)
            known = {(e.at, e.reason) for e in store.device_events(crashed, limit=100)}
            farm.fleet.crash_app(crashed)
            wait(browser, lambda b: incidents_text(b, crashed) != before,
                 f"{crashed}'s incidents to change", CRASH_SEEN_S)
            new = [e for e in store.device_events(crashed, limit=100)
                   if (e.at, e.reason) not in known]
            assert new, "the crash left no device event"
            wait(browser, lambda b: any(e.to_state in incidents_text(b, crashed) for e in new),
                 "the new event on the page")
            shoot("fleet-after-crash")
            farm.farmd.manager.sweep()  # what the health interval runs: a reading for the chart
            device_page(browser, base, crashed, new[-1].to_state)
            shoot("device")
            browser.get(f"{base}/")
            browser.set_window_size(390, 844)  # a phone's screen: rows become cards
            shoot("fleet-phone-screen")
            browser.set_window_size(1280, 900)

            # An operator drains and undrains a phone from the page (the API's POST routes).
            drain_and_undrain(browser, store, farm.serials[1], shoot)
            farm.wait_ready()

            # A tuning job: the queue shows it, its page's chart grows while it runs.
            job_id = farm.enqueue(tune_spec())
            browser.get(f"{base}/queue")
            what = wait(browser, lambda b: [c.text for c in css(
                b, f'#running tr[data-job="{job_id}"] .c-what, #queued tr[data-job="{job_id}"] '
                   '.c-what')], f"job {job_id} on the queue page")
            assert "tune gemm n=64" in what[0], what  # the queue names the workload
            shoot("queue")
            browser.get(f"{base}/jobs/{job_id}")
            first = wait(browser, chart_points, "the first trials in the chart", TUNE_DEADLINE_S)
            grown = wait(browser, lambda b: chart_points(b) > first and chart_points(b),
                         "the chart to grow", TUNE_DEADLINE_S)
            assert grown > first
            shoot("job-tuning")
            farm.wait_finished([job_id], TUNE_DEADLINE_S)
            assert store.get_job(job_id).state is JobState.SUCCEEDED  # type: ignore[union-attr]
            wait(browser, lambda b: len(css(b, "#phones tbody tr:not(.empty)")) >= 2
                 and not css(b, "#phones-section[hidden]"), "results per phone")
            assert chart_points(browser) >= TRIALS
            check_speedups(browser, job_id, farm.serials)
            shoot("job-finished")
            browser.get(f"{base}/queue")
            wait(browser, lambda b: css(b, f'#ended tr[data-job="{job_id}"]'), "the job ended")

            compare_and_history(browser, base, job_id,
                                views_workloads(store, farm.farmd.settings), shoot)


def compare_and_history(browser: Any, base: str, job_id: int, workloads: list[str],
                        shoot: Callable[[str], Path]) -> None:
    """The comparison (the job with itself: no phone is slower) and the history."""
    browser.get(f"{base}/compare?a={job_id}&b={job_id}")
    verdict = wait(browser, lambda b: css(b, "#verdict")[0].text, "the verdict")
    assert "no phone is slower in B" in verdict
    assert len(css(browser, "#comparison tr[data-serial]")) == 2
    wait(browser, lambda b: css(b, f'#refs option[value="{job_id}"]'), "the job in the lists")
    shoot("compare")
    browser.get(f"{base}/history?" + urlencode({"workload": workloads[0]}))
    wait(browser, lambda b: len(css(b, "#history tbody tr:not(.empty)")) >= 2,
         "the workload's history")
    shoot("history")


def views_workloads(store: Store, settings: Settings) -> list[str]:
    """The workloads the history page offers."""
    from farm.web.views import history_view

    return list(history_view(store, settings, None)["workloads"])
