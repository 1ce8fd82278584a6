"""``farmctl results``: flat rows per sample, spread per phone, noise marks and plots."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from device_states import put_state
from stored_results import ab_job, ab_rounds
from tuned_jobs import finished_tune, nothing_searched_summary

from farm.queue import DeviceState, Outcome, Store
from farm.queue.records import SnapshotData
from farm.queue.scheduler import Assignment

NOW = datetime(2025, 1, 1, tzinfo=UTC)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STEADY = (0.010, 0.0101, 0.0099, 0.0100)
NOISY = (0.010, 0.020, 0.005, 0.015)


def _snap(serial: str, temp_c: float) -> SnapshotData:
    return SnapshotData(serial, NOW, {"battery_temp_c": temp_c}, {"thermal_status": 1},
                        {"model": f"M-{serial}", "soc": "sm8150", "abi": "arm64-v8a"})


def measured(store: Store, run: dict[str, tuple[float, ...]], *, n: int = 64,
             repetitions: tuple[int, ...] = (), at: datetime = NOW) -> list[int]:
    """One gemm job per phone of ``run`` (serial -> samples), as one --each run; the job ids."""
    for serial in run:
        if store.get_device(serial) is None:
            store.upsert_device(serial, NOW, {"abi": "arm64-v8a"})
            put_state(store, serial, DeviceState.READY, "test", NOW)
    specs = [{"kind": "gemm", "params": {"n": n}, "devices": {"serials": [s]}} for s in run]
    _, job_ids = store.enqueue_run(specs, at)
    for job_id, (serial, samples) in zip(job_ids, run.items(), strict=True):
        [claim] = store.claim([Assignment(job_id, (serial,), 60.0)], at)
        outcome = Outcome({"kind": "gemm"}, samples, "s", (serial,) * len(samples),
                          (_snap(serial, 30.0 + len(serial)),),
                          sample_repetitions=repetitions)
        assert store.finish(claim.attempt.id, outcome, at)
    return job_ids


class TestFlatRows:
    def test_csv_carries_serial_and_temperature_per_sample(self, farmctl, store: Store) -> None:
        """Every CSV line is one raw sample with its phone, model, repetition and temperature."""
        [a, _] = measured(store, {"A": STEADY, "BB": NOISY})
        run_id = store.get_job(a).run_id  # type: ignore[union-attr]
        out = farmctl("results", "--run", str(run_id), "--format", "csv").stdout
        rows = list(csv.DictReader(io.StringIO(out)))
        assert len(rows) == 8
        assert {(r["serial"], r["battery_temp_c"], r["model"]) for r in rows} == {
            ("A", "31", "M-A"), ("BB", "32", "M-BB")}
        assert {r["run_id"] for r in rows} == {run_id}
        assert {r["repetition"] for r in rows} == {"0"} and rows[0]["thermal_status"] == "1"

    def test_json_rows_of_one_job(self, farmctl, store: Store) -> None:
        """--job ... --json gives that job's samples only, with their serial."""
        [a, b] = measured(store, {"A": STEADY, "B": NOISY})
        rows = json.loads(farmctl("results", "--job", str(b), "--json").stdout)
        assert [(r["job_id"], r["serial"], r["value"]) for r in rows] == [
            (b, "B", v) for v in NOISY]
        assert a != b

    def test_an_ab_jobs_rows_carry_each_samples_build_round_and_reading(
        self, farmctl, store: Store
    ) -> None:
        """An A/B job's CSV and JSON rows: every raw sample with its phone, build (arm), round
        and the reading taken last before its round; the table adds each phone's verdict (too few
        rounds here to decide)."""
        rounds = ab_rounds(1, 1.10, rounds=6)
        job_id = ab_job(store, {"P1": rounds}, temps_c={"P1": [30.0, 33.5]})
        out = farmctl("results", "--job", str(job_id), "--format", "csv").stdout
        rows = list(csv.DictReader(io.StringIO(out)))
        assert [(r["serial"], r["arm"], r["round"]) for r in rows] == [
            ("P1", arm, str(i)) for i in range(6) for arm in "ab"]
        assert [float(r["value"]) for r in rows] == pytest.approx(
            [value for pair in rounds for value in pair], rel=1e-5)
        assert [float(r["battery_temp_c"]) for r in rows] == [30.0] * 6 + [33.5] * 6
        as_json = json.loads(farmctl("results", "--job", str(job_id), "--json").stdout)
        assert [(r["arm"], r["round"]) for r in as_json] == [
            (r["arm"], int(r["round"])) for r in rows]
        table = farmctl("results", "--job", str(job_id)).stdout
        assert "A: gemm n=64 float32" in table and "\tundecided\t6 rounds" in table


class TestSpreadTable:
    def test_one_line_per_phone_noisy_marked(self, farmctl, store: Store) -> None:
        """The table has one line per job and phone; only the noisy phone is marked."""
        measured(store, {"A": STEADY, "B": NOISY})
        lines = farmctl("results").stdout.splitlines()
        a_line = next(line for line in lines if "A" in line.split("\t"))  # piped: tab-separated
        b_line = next(line for line in lines if "B" in line.split("\t"))
        assert "10.000 ms" in a_line and "noisy" not in a_line
        assert "noisy" in b_line and "re-run" not in b_line

    def test_a_rerun_replaces_the_noisy_measurement(self, farmctl, store: Store) -> None:
        """A phone re-run once shows the re-run's spread and says so."""
        measured(store, {"A": NOISY + STEADY}, repetitions=(0,) * 4 + (1,) * 4)
        out = farmctl("results").stdout
        assert "re-run: steady" in out and "10.000 ms" in out

    def test_max_cv_comes_from_the_config(self, farmctl, store: Store, config: Path) -> None:
        """[results] max_cv = 0.9 makes the noisy phone acceptable."""
        config.write_text(config.read_text() + "\n[results]\nmax_cv = 0.9\n")
        measured(store, {"B": NOISY})
        assert "noisy" not in farmctl("results").stdout


class TestPlots:
    def test_plot_of_a_run_is_a_png(self, farmctl, store: Store, tmp_path: Path) -> None:
        """--plot writes a PNG of the run's phones."""
        [a, _] = measured(store, {"A": STEADY, "B": NOISY})
        path = tmp_path / "plots" / "run.png"
        run_id = str(store.get_job(a).run_id)  # type: ignore[union-attr]
        result = farmctl("results", "--run", run_id, "--plot", str(path))
        assert result.exit_code == 0, result.output
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 10_000

    def test_history_plot_is_a_png(self, farmctl, store: Store, tmp_path: Path) -> None:
        """--history WORKLOAD --plot draws one workload's medians over time."""
        for day in range(3):
            measured(store, {"A": STEADY, "B": STEADY}, at=NOW + timedelta(days=day))
        measured(store, {"A": STEADY}, n=128)
        path = tmp_path / "history.png"
        result = farmctl("results", "--history", "gemm n=64 float32", "--plot", str(path))
        assert result.exit_code == 0, result.output
        rows = [line.split("\t") for line in result.stdout.splitlines()]  # piped: tab-separated
        assert sum("A" in row for row in rows) == 3  # the n=128 job is another workload
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 10_000


class TestErrors:
    @pytest.mark.parametrize(("args", "message"), [
        (["--job", "9"], "Error: no job 9"),
        (["--run", "r-nope"], "Error: no run r-nope"),
        (["--history", "gemm n=1"], "Error: no results of workload 'gemm n=1'"),
    ])
    def test_unknown_selection_is_one_line(self, farmctl, args: list[str], message: str) -> None:
        """A job, run or workload without results: exit 2 and one line."""
        result = farmctl("results", *args)
        assert result.exit_code == 2 and result.stderr.startswith(message)
        assert len(result.stderr.splitlines()) == 1

    def test_job_and_run_together_is_a_usage_error(self, farmctl) -> None:
        """--job and --run are two selections: exit 2."""
        result = farmctl("results", "--job", "1", "--run", "r-1")
        assert result.exit_code == 2 and "give one" in result.stderr

    def test_unwritable_plot_is_one_line(self, farmctl, store: Store, tmp_path: Path) -> None:
        """A plot path under a file: exit 2, no traceback."""
        measured(store, {"A": STEADY})
        (tmp_path / "file").write_text("")
        result = farmctl("results", "--plot", str(tmp_path / "file" / "x.png"))
        assert result.exit_code == 2 and result.stderr.startswith("Error: cannot write the plot")


def model_result(store: Store, runs: list[dict[str, object]]) -> int:
    """A finished model job on phone A whose summary has ``runs`` (the last counts); its id."""
    store.upsert_device("A", NOW, {"abi": "arm64-v8a"})
    put_state(store, "A", DeviceState.READY, "test", NOW)
    job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
    [claim] = store.claim([Assignment(job_id, ("A",), 60.0)], NOW)
    assert store.finish(claim.attempt.id, Outcome({"kind": "model", "runs": runs}, STEADY,
                                                  "s", ("A",) * 4), NOW)
    return job_id


class TestLoadTimes:
    def test_a_model_result_shows_load_first_run_and_peak_memory_per_phone(
        self, farmctl, store: Store
    ) -> None:
        """A model job's runs carry load_s, first_run_s and peak_memory_kb: results --job and
        job show them, of each phone's last run."""
        job_id = model_result(store, [{"serial": "A", "load_s": 0.25, "first_run_s": 0.0125,
                                       "peak_memory_kb": 1024},
                                      {"serial": "A", "load_s": 0.5, "first_run_s": 0.025,
                                       "peak_memory_kb": 204800}])
        for argv in (("results", "--job", str(job_id)), ("job", str(job_id))):
            out = farmctl(*argv).stdout
            # piped: the table's header, no title
            assert "phone\tload\tfirst run\tpeak memory" in out, argv
            line = next(line for line in out.splitlines() if "500.000 ms" in line)
            assert "25.000 ms" in line and "250.000 ms" not in out
            assert "200.0 MiB" in line and "1.0 MiB" not in out

    def test_results_without_load_times_show_no_load_table(self, farmctl, store: Store) -> None:
        """A gemm result has no load table."""
        [job_id] = measured(store, {"A": STEADY})
        assert "library load" not in farmctl("results", "--job", str(job_id)).stdout


#: A model --profile run's profile: two kernels, heaviest first (farm.jobs.profile).
KERNELS = [{"name": "fused_conv2d_add_relu", "calls": 2, "per_call_ms": 0.02, "total_ms": 0.04,
            "share_pct": 80.0},
           {"name": "max_pool2d", "calls": 1, "per_call_ms": 0.01, "total_ms": 0.01,
            "share_pct": 20.0}]
PROFILE = {"kernels": KERNELS, "kernels_ms": 0.05, "model_ms": 0.0625, "ratio": 0.8,
           "missing": []}


class TestKernelProfile:
    def test_a_profiled_model_result_lists_its_heaviest_kernels_per_phone(
        self, farmctl, store: Store
    ) -> None:
        """results --job prints each phone's last profile, heaviest first, with the sum's ratio."""
        job_id = model_result(store, [{"serial": "A", "profile": {**PROFILE,
                                                                  "kernels": KERNELS[1:]}},
                                      {"serial": "A", "profile": PROFILE}])
        out = farmctl("results", "--job", str(job_id)).stdout
        assert "kernels on A: sum 0.0500 ms of the model's 0.0625 ms (80%)" in out
        rows = [line.split("\t") for line in out.splitlines() if line.startswith(("fused", "max"))]
        assert rows == [["fused_conv2d_add_relu", "2", "0.0200 ms", "0.0400 ms", "80.0"],
                        ["max_pool2d", "1", "0.0100 ms", "0.0100 ms", "20.0"]]

    def test_farmctl_profile_prints_the_same_tables_and_json(self, farmctl, store: Store) -> None:
        """farmctl profile JOB: the phone's kernels heaviest first; --json its whole profile; a
        job without one is one line naming it."""
        job_id = model_result(store, [{"serial": "A", "profile": PROFILE}])
        out = farmctl("profile", str(job_id)).stdout
        assert out.index("fused_conv2d_add_relu") < out.index("max_pool2d")
        assert "sum 0.0500 ms of the model's 0.0625 ms (80%)" in out
        shown = json.loads(farmctl("profile", str(job_id), "--json").stdout)
        assert shown == {"job_id": job_id, "phones": {"A": PROFILE}}
        plain = model_result(store, [{"serial": "A"}])
        result = farmctl("profile", str(plain))
        assert result.exit_code != 0
        assert f"job {plain} has no kernel profile" in result.stderr


class TestOutputs:
    def test_outputs_are_written_per_phone_as_npy(
        self, farmctl, store: Store, tmp_path: Path
    ) -> None:
        """results --job N --outputs DIR writes the phone's last kept outputs, one .npy each."""
        import numpy as np

        from farm.jobs.model_io import outputs_npz

        want = np.arange(10, dtype="float32").reshape(1, 10)
        sha = store.put_blob(outputs_npz([want]), NOW)
        job_id = model_result(store, [{"serial": "A", "outputs_sha256": sha}])
        result = farmctl("results", "--job", str(job_id), "--outputs", str(tmp_path / "out"))
        assert result.exit_code == 0, result.output
        np.testing.assert_array_equal(np.load(tmp_path / "out" / "A" / "output_0.npy"), want)

    def test_a_job_without_outputs_is_one_line(self, farmctl, store: Store, tmp_path: Path) -> None:
        """A job run on random inputs kept no outputs: one line says so, nothing is written."""
        job_id = model_result(store, [{"serial": "A"}])
        result = farmctl("results", "--job", str(job_id), "--outputs", str(tmp_path / "out"))
        assert result.exit_code != 0
        assert result.stderr == (f"Error: job {job_id} kept no outputs: only a model job "
                                 "given --inputs does\n")
        assert not (tmp_path / "out").exists()


class TestTuningOutcome:
    def test_results_of_a_model_tune_say_its_best_build_and_no_speedup(
        self, farmctl, store: Store
    ) -> None:
        """results --job of the tune that searched nothing: best build untuned and why, no
        speed-up, the records, picks, tasks and trials, after the per-phone table."""
        job_id = finished_tune(store, nothing_searched_summary())
        out = farmctl("results", "--job", str(job_id)).stdout
        assert "best build: untuned (no tuning record applied (nothing was searched" in out
        assert "speed-up: none: no tuned build exists" in out
        assert "tasks tuned: 32 of the model's 55; trials measured 32/32" in out
        assert "1.10681" not in out and "1.107" not in out
