"""``farmctl demo`` end to end, and farmd's metrics endpoint while it runs."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import httpx
import psutil
import pytest
from click.testing import CliRunner
from rich.console import Console

from farm.cli.demo import run_demo
from farm.clock import wait_until
from farm.config import Settings
from farm.daemon import Farmd
from farm.netaddr import free_port
from farm.procs import process_alive
from farm.queue.models import DeviceState, JobState
from farm.virtual.cli import main as phones_cli
from farm.virtual.testing import adb_server

pytestmark = pytest.mark.fleet

#: Series farm/metrics.py documents that farmd sets from its database.
DOCUMENTED_SERIES = ("farm_up", "farm_phones", "farm_jobs", "farm_phone_battery_temp_celsius",
                     "farm_phone_thermal_status", "farm_recoveries_total",
                     "farm_job_duration_seconds")


@pytest.mark.stock_app_delay  # a user's first command, with the stock app's 5 s relaunch
class TestDemo:
    def test_runs_to_its_table_and_plot_and_leaves_no_process(self, tmp_path: Path) -> None:
        """Two phones, N=64: every job succeeds, the table and PNG exist, no child is left."""
        out = io.StringIO()
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        result = run_demo(2, 64, tmp_path / "demo", console=Console(file=out, width=200))
        text = out.getvalue()
        assert result.ok, text
        assert len(result.rows) == 3  # GEMM on each phone, the model on the first
        assert {r.workload for r in result.rows} == {"gemm n=64 float32", "model small_cnn.onnx"}
        assert all(r.latency_ms and r.readings["battery_temp_c"] is not None
                   and r.readings["thermal_status"] is not None for r in result.rows)
        assert all(r.gflops for r in result.rows if r.workload.startswith("gemm"))
        assert result.plot is not None and result.plot.read_bytes()[:4] == b"\x89PNG"
        assert "GFLOPS" in text and "thermal status" in text
        assert result.leftover_pids == []
        assert {p.pid for p in psutil.Process().children(recursive=True)} - before == set()
        assert result.elapsed_s < 180


    def test_keep_cleans_up_on_sigterm(self, tmp_path: Path) -> None:
        """``farmctl demo --keep`` stops everything on SIGTERM as on Ctrl-C, and says so."""
        argv = [sys.executable, "-c", "from farm.cli.main import main; main()", "demo", "--keep",
                "--phones", "1", "--n", "64", "--no-model", "--data-dir", str(tmp_path / "demo")]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            assert process.stdout is not None
            lines = []
            while "keep running" not in (line := process.stdout.readline().decode()):
                assert line, "".join(lines)  # it exited before keeping the fleet
                lines.append(line)
            started = psutil.Process(process.pid).children(recursive=True)
            assert started
            process.send_signal(signal.SIGTERM)
            rest = process.stdout.read().decode()
            assert process.wait(timeout=120) == 0, rest
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        assert "everything the demo started has stopped" in rest
        wait_until(lambda: not any(process_alive(p) for p in started), 30,
                   "the demo's processes ended")


class TestFarmdMetrics:
    def test_endpoint_answers_with_the_phone_and_job_series(self, tmp_path: Path) -> None:
        """While farmd runs, /metrics serves farm_up, phones and jobs per state, job durations.

        Its virtual phones also take ``farm-phones fault`` (they had no control.json).
        """
        with adb_server() as server:
            metrics_port = free_port()
            settings = Settings.model_validate({
                "data_dir": str(tmp_path), "adb": {"port": server.port},
                "tracker": {"port": free_port()}, "metrics": {"port": metrics_port},
                "api": {"port": free_port()},
                "virtual": {"network": "usb-only"},
            })
            farmd = Farmd(settings, virtual_phones=1)
            try:
                farmd.start()
                serial = farmd.fleet.serials[0]
                wait_until(lambda: getattr(farmd.store.get_device(serial), "state", None)
                           is DeviceState.READY, 90, "phone ready")
                job_id = farmd.store.enqueue({"kind": "gemm", "params": {"n": 64}},
                                             farmd.clock.now())
                wait_until(lambda: farmd.store.get_job(job_id).state is JobState.SUCCEEDED,
                           120, "gemm job succeeded")
                farmd.manager.sweep()  # what the health interval job runs
                farmd.update_metrics()  # what the 15 s interval job runs
                farmd.update_metrics()  # a second read observes no attempt twice
                url = f"http://127.0.0.1:{metrics_port}/metrics"
                with urllib.request.urlopen(url, timeout=10) as response:
                    body = response.read().decode()
                assert farmd.api_server is not None  # farmd serves the API too
                ping = httpx.get(f"{farmd.api_server.url}/api/v1/ping", timeout=10)
                assert ping.json()["ok"] is True
                faulted = CliRunner().invoke(phones_cli, [
                    "fault", serial, "throttle", "--factor", "1",
                    "--data-dir", str(tmp_path / "phones")])
                assert faulted.exit_code == 0, faulted.output
                assert f"throttle {serial}: ok" in faulted.output
            finally:
                farmd.stop()
        assert not (tmp_path / "phones" / "control.json").exists()
        assert "farm_up 1.0" in body
        assert 'farm_phones{state="ready"} 1.0' in body
        assert 'farm_jobs{state="succeeded"} 1.0' in body
        assert 'farm_job_duration_seconds_count{kind="gemm"} 1.0' in body
        assert f'farm_phone_battery_temp_celsius{{serial="{serial}"}}' in body
        assert f'farm_phone_thermal_status{{serial="{serial}"}} 0.0' in body
        for series in DOCUMENTED_SERIES:
            assert f"# HELP {series.removesuffix('_total')}" in body, series
