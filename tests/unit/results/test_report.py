"""farm.results.report: pairing results with snapshots, the table and the PNG plot."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from farm.health.readings import declared
from farm.queue.models import JobState
from farm.queue.records import JobView, ResultView, SnapshotData
from farm.results.report import ResultRow, results_table, rows_from, write_plot

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _job(job_id: int = 1, state: JobState = JobState.SUCCEEDED, error: str | None = None,
         kind: str = "gemm", serials: list[str] | None = None) -> JobView:
    params = {"n": 512, "dtype": "float32"} if kind == "gemm" else {"path": "/m/small_cnn.onnx"}
    spec = {"kind": kind, "params": params, "devices": {"serials": serials or ["A"]}}
    return JobView(job_id, kind, spec, state, 0, NOW, None, 3, 1, 600.0, (), None, NOW, error)


def _result(runs: list[dict], attempt_id: int = 7) -> ResultView:
    return ResultView(1, 1, attempt_id, {"runs": runs}, NOW, (0.01, 0.02), "s")


def _snap(serial: str, temp_c: float, status: int, attempt_id: int = 7) -> SnapshotData:
    return SnapshotData(serial, NOW, {"battery_temp_c": temp_c}, {"thermal_status": status},
                        {}, 1.5, attempt_id)


class TestRowsFrom:
    def test_each_run_gets_the_snapshot_taken_before_it(self) -> None:
        """The i-th snapshot of a phone pairs with its i-th run, phone by phone."""
        runs = [{"serial": "A", "mean_s": 0.02, "gflops": 13.4},
                {"serial": "B", "mean_s": 0.04, "gflops": 6.7},
                {"serial": "A", "mean_s": 0.03, "gflops": 8.9}]
        snaps = [_snap("A", 30.0, 0), _snap("B", 31.0, 1), _snap("A", 33.0, 2)]
        rows = rows_from(_job(), [_result(runs)], snaps, {"A": "Pixel 8"})
        assert [(r.serial, r.readings["battery_temp_c"], r.readings["thermal_status"])
                for r in rows] == [
            ("A", 30.0, 0), ("B", 31.0, 1), ("A", 33.0, 2)]
        assert rows[0].latency_ms == 20.0
        assert rows[0].gflops == 13.4
        assert rows[0].phone_model == "Pixel 8"
        assert rows[0].workload == "gemm n=512 float32"
        assert rows[0].thermal_wait_s == 1.5

    def test_a_noisy_phone_shows_its_rerun_with_the_rerun_snapshot(self) -> None:
        """A re-run noisy phone gives one row, its last measurement; other phones keep theirs."""
        runs = [{"serial": "A", "mean_s": 0.02, "rerun": False},
                {"serial": "B", "mean_s": 0.04, "rerun": False},
                {"serial": "A", "mean_s": 0.03, "rerun": True}]
        snaps = [_snap("A", 30.0, 0), _snap("B", 31.0, 1), _snap("A", 33.0, 2)]
        rows = rows_from(_job(), [_result(runs)], snaps)
        assert [(r.serial, r.latency_ms, r.readings["battery_temp_c"]) for r in rows] == [
            ("B", 40.0, 31.0), ("A", 30.0, 33.0)]

    def test_snapshots_of_a_failed_earlier_attempt_are_ignored(self) -> None:
        """Only the snapshots of the attempt that produced the result are paired."""
        snaps = [_snap("A", 44.0, 3, attempt_id=6), _snap("A", 29.0, 0, attempt_id=7)]
        rows = rows_from(_job(), [_result([{"serial": "A", "mean_s": 0.01}])], snaps)
        assert rows[0].readings["battery_temp_c"] == 29.0

    def test_a_model_run_has_latency_but_no_gflops(self) -> None:
        """Model runs report latency only, named by the model file."""
        rows = rows_from(_job(kind="model"), [_result([{"serial": "A", "mean_s": 2e-5}])], [])
        assert rows[0].gflops is None
        assert rows[0].workload == "model small_cnn.onnx"
        assert rows[0].readings["battery_temp_c"] is None

    def test_a_failed_job_gives_one_row_per_asked_phone_with_its_error(self) -> None:
        """A job without a result still appears, with its state and error."""
        rows = rows_from(_job(state=JobState.FAILED, error="cannot compile", serials=["A", "B"]),
                         [], [])
        assert [(r.serial, r.state, r.error) for r in rows] == [
            ("A", "failed", "cannot compile"), ("B", "failed", "cannot compile")]
        assert rows[0].latency_ms is None


class TestThermalLabel:
    def test_names_the_android_status(self) -> None:
        """Status codes carry PowerManager's names; unknown is a dash."""
        status = declared("android").get("thermal_status")
        assert status is not None
        assert status.text(0) == "0 (none)"
        assert status.text(3) == "3 (severe)"
        assert status.text(None) == "-"
        assert status.text(9) == "9 (?)"


class TestResultsTable:
    def test_shows_figures_temperature_and_status(self) -> None:
        """The table prints GFLOPS, latency, battery temperature and thermal status."""
        row = ResultRow(1, "A", "Pixel 8", "gemm n=512 float32", "succeeded", gflops=12.345,
                        latency_ms=21.5, readings={"battery_temp_c": 27.0, "thermal_status": 0})
        console = Console(width=200, record=True)
        console.print(results_table([row]))
        text = console.export_text()
        for expected in ("Pixel 8", "12.35", "21.500", "27.0", "0 (none)", "succeeded"):
            assert expected in text


class TestWritePlot:
    def test_writes_a_png(self, tmp_path: Path) -> None:
        """The plot is a PNG file in the folder asked for (created if missing)."""
        rows = [ResultRow(1, "A", None, "gemm n=64 float32", "succeeded", gflops=3.0,
                          latency_ms=0.2, readings={"battery_temp_c": 28.0, "thermal_status": 0}),
                ResultRow(2, "A", None, "model m.onnx", "succeeded", latency_ms=0.02)]
        path = write_plot(rows, tmp_path / "out" / "plot.png")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def test_no_measurement_still_writes_a_png(self, tmp_path: Path) -> None:
        """Only failed rows: the plot says so instead of failing."""
        rows = [ResultRow(1, "A", None, "gemm n=64 float32", "failed", error="x")]
        assert write_plot(rows, tmp_path / "p.png").stat().st_size > 0
