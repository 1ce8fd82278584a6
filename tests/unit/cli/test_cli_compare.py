"""farmctl compare: exit codes a CI pipeline gates on, --json, the plot, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stored_results import NOW, finished_job, timings
from tuned_jobs import model_job_on, model_tune_on

from farm.queue import Store
from farm.queue.regressions import RegressionView
from farm.results.compare import EXIT_REGRESSED, EXIT_UNDECIDED


@pytest.fixture
def runs(store: Store) -> dict[str, int]:
    """Jobs on phone P1: a baseline, an unchanged re-run, one 10% slower, one 10% faster."""
    return {
        "base": finished_job(store, "P1", timings(1)),
        "same": finished_job(store, "P1", timings(2)),
        "slower": finished_job(store, "P1", timings(3, median_s=0.011)),
        "faster": finished_job(store, "P1", timings(4, median_s=0.009)),
    }


class TestExitCodes:
    def test_unchanged_exits_0(self, farmctl, runs: dict[str, int]) -> None:
        """Nothing slower: exit 0 and the table says no change."""
        result = farmctl("compare", str(runs["base"]), str(runs["same"]))
        assert result.exit_code == 0, result.output
        assert "no change" in result.stdout and "P1" in result.stdout

    def test_faster_exits_0(self, farmctl, runs: dict[str, int]) -> None:
        """A faster phone is no regression."""
        result = farmctl("compare", str(runs["base"]), str(runs["faster"]))
        assert result.exit_code == 0 and "faster" in result.stdout

    def test_slower_exits_3(self, farmctl, runs: dict[str, int]) -> None:
        """A phone 10% slower: the documented exit code, and stderr names the phone."""
        result = farmctl("compare", str(runs["base"]), str(runs["slower"]))
        assert result.exit_code == EXIT_REGRESSED == 3
        assert "slower" in result.stdout and "P1" in result.stderr

    def test_a_looser_threshold_lets_it_pass(self, farmctl, runs: dict[str, int]) -> None:
        """--threshold 0.2: a 10% change no longer counts."""
        result = farmctl("compare", str(runs["base"]), str(runs["slower"]), "--threshold", "0.2")
        assert result.exit_code == 0 and "no change" in result.stdout

    def test_config_sets_the_default_threshold(self, farmctl, config: Path,
                                               runs: dict[str, int]) -> None:
        """[results] change_threshold is the default of --threshold."""
        config.write_text(config.read_text() + "[results]\nchange_threshold = 0.2\n")
        assert farmctl("compare", str(runs["base"]), str(runs["slower"])).exit_code == 0


class TestJson:
    def test_json_has_a_line_per_phone(self, farmctl, runs: dict[str, int]) -> None:
        """--json: ratio, CI, p-value and verdict per phone, and the exit code it will use."""
        result = farmctl("compare", str(runs["base"]), str(runs["slower"]), "--json")
        data = json.loads(result.stdout)
        [phone] = data["phones"]
        assert phone["serial"] == "P1" and phone["verdict"] == "slower"
        assert phone["ci_low"] <= phone["ratio"] <= phone["ci_high"] and phone["p_value"] < 0.01
        assert data["regressed"] and data["exit_code"] == result.exit_code == 3
        assert (data["threshold"], data["alpha"]) == (0.05, 0.01)
        assert data["a"]["workload"] == data["b"]["workload"]


class TestPlot:
    def test_plot_writes_a_png(self, farmctl, runs: dict[str, int], tmp_path: Path) -> None:
        """--plot FILE.png writes a PNG image of the ratios."""
        path = tmp_path / "cmp.png"
        result = farmctl("compare", str(runs["base"]), str(runs["same"]), "--plot", str(path))
        assert result.exit_code == 0, result.output
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000

    def test_unwritable_plot_is_one_line(self, farmctl, runs: dict[str, int],
                                         tmp_path: Path) -> None:
        """A plot into a missing folder is a one-line error, not a traceback."""
        path = tmp_path / "absent" / "cmp.png"
        result = farmctl("compare", str(runs["base"]), str(runs["same"]), "--plot", str(path))
        assert result.exit_code == 2 and result.stderr.startswith("Error: cannot write the plot")
        assert result.exception is None or isinstance(result.exception, SystemExit)


class TestErrors:
    @pytest.mark.parametrize(("args", "message"), [
        (["99", "1"], "Error: no job 99\n"),
        (["r-0123456789ab", "1"], "Error: no run r-0123456789ab\n"),
        (["1", "nope"], "Error: 'nope' is neither a job id nor a run id (r-...)\n"),
    ])
    def test_unknown(self, farmctl, runs: dict[str, int], args: list[str], message: str) -> None:
        """Unknown jobs and runs: exit 2 and one line on stderr."""
        result = farmctl("compare", *args)
        assert (result.exit_code, result.stderr) == (2, message)

    def test_unfinished(self, farmctl, store: Store, runs: dict[str, int]) -> None:
        """A queued job: exit 2, saying it is queued."""
        queued = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        result = farmctl("compare", str(runs["base"]), str(queued))
        assert result.exit_code == 2
        assert result.stderr == (f"Error: job {queued} is queued: "
                                 "only a succeeded job can be compared\n")

    def test_no_common_phone_and_other_workload(self, farmctl, store: Store,
                                                runs: dict[str, int]) -> None:
        """Another phone or another workload: exit 2, one line each."""
        elsewhere = finished_job(store, "P2", timings(5))
        bigger = finished_job(store, "P1", timings(6), n=128)
        for other, words in ((elsewhere, "no phone in common"), (bigger, "different workloads")):
            result = farmctl("compare", str(runs["base"]), str(other))
            assert result.exit_code == 2 and words in result.stderr
            assert result.stderr.count("\n") == 1

    @pytest.mark.parametrize("value", ["0", "1", "nan", "x"])
    def test_bad_threshold(self, farmctl, runs: dict[str, int], value: str) -> None:
        """--threshold outside (0, 1) is a usage error."""
        result = farmctl("compare", "1", "2", "--threshold", value)
        assert result.exit_code == 2 and "--threshold" in result.stderr


class TestRegressionsListing:
    def test_results_regressions_lists_slower_phones(self, farmctl, store: Store,
                                                     runs: dict[str, int]) -> None:
        """results --regressions shows the watch's slower verdicts, not its 'no change' ones."""
        rows = [RegressionView(0, runs["slower"], runs["base"], "P1", 1.1, 1.08, 1.12, 1e-6,
                               "slower", NOW),
                RegressionView(0, runs["same"], runs["base"], "P1", 1.0, 0.99, 1.01, 0.7,
                               "no change", NOW)]
        assert store.record_regressions(runs["slower"], rows[:1])
        assert store.record_regressions(runs["same"], rows[1:])
        assert not store.record_regressions(runs["same"], rows[1:])  # once per job
        listed = json.loads(farmctl("results", "--regressions", "--json").stdout)
        assert [(r["job_id"], r["serial"], r["verdict"]) for r in listed] == [
            (runs["slower"], "P1", "slower")]
        table = farmctl("results", "--regressions")
        assert table.exit_code == 0 and "slower" in table.stdout and "1.08" in table.stdout


class TestUndecided:
    def test_three_samples_a_side_exit_4_and_say_why(self, farmctl, store: Store) -> None:
        """3 against 3 (the old default): 'undecided', exit 4, the reason on stdout and stderr."""
        a = finished_job(store, "P1", timings(1, n=3))
        b = finished_job(store, "P1", timings(2, n=3, median_s=0.0115))
        result = farmctl("compare", str(a), str(b))
        assert result.exit_code == EXIT_UNDECIDED == 4, result.output
        assert "undecided" in result.stdout and "cannot reach alpha" in result.stdout
        assert "no change" not in result.stdout and "undecided on 1 phone(s): P1" in result.stderr


class TestSameLibrary:
    def test_a_no_record_tune_is_not_called_slower(self, farmctl, store: Store) -> None:
        """Untuned vs --tuned N of a tune that applied no record, 79.5% apart: exit 4, each
        line and stderr say the two ran one library; no A/B job is suggested."""
        tune = model_tune_on(store, "P1", timings(1), timings(2), best_build="untuned",
                             records_tuned=0, records_applied=0)
        a = model_job_on(store, "P1", timings(3))
        b = model_job_on(store, "P1", timings(4, median_s=0.01795), tuned=tune)
        same = (f"A and B ran the same library: tune job {tune} applied no tuning record; "
                "the difference is the phones' noise, not a build's")
        result = farmctl("compare", str(a), str(b))
        assert result.exit_code == EXIT_UNDECIDED, result.output
        [line] = [row for row in result.stdout.splitlines() if row.startswith("P1")]
        assert "\tundecided\t" in line and same in line and "slower\t" not in line
        assert same in result.stderr and "enqueue ab" not in result.stderr
        data = json.loads(farmctl("compare", str(a), str(b), "--json").stdout)
        assert data["same_library"] == same and data["exit_code"] == 4
