"""``farmctl enqueue tune --model`` and a tuning job's progress in ``farmctl job``."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from click.testing import Result
from tuned_jobs import finished_tune, nothing_searched_summary

from farm.demo_model import write_small_cnn
from farm.queue import Store
from farm.tuning import tune_work_dir
from farm.tuning.counters import TaskProgress
from farm.tuning.progress import TuneProgress

NOW = datetime(2025, 1, 1, tzinfo=UTC)


class TestEnqueueTuneModel:
    def test_model_tuning_spec(self, farmctl: Callable[..., Result], store: Store,
                               tmp_path: Path) -> None:
        """--model stores the model (path, shapes, target) and the task caps, and no gemm."""
        model = write_small_cnn(tmp_path / "cnn.onnx")
        result = farmctl("enqueue", "tune", "--model", str(model), "--input-shape", "x=1,3,16,16",
                         "--trials", "8", "--max-tasks", "2", "--trials-per-task", "4",
                         "--phones", "2")
        assert result.exit_code == 0, result.output
        params = store.get_job(1).spec["params"]  # type: ignore[union-attr]
        assert params["gemm"] is None
        assert params["model"]["input_shapes"] == {"x": [1, 3, 16, 16]}
        assert params["model"]["target"] == "cpu"
        assert (params["max_tasks"], params["trials_per_task"], params["trials"]) == (2, 4, 8)

    def test_two_workloads_or_caps_on_a_gemm_are_refused(
        self, farmctl: Callable[..., Result], tmp_path: Path
    ) -> None:
        """A gemm flag with --model, or a task cap on a gemm, is a one-line usage error."""
        model = write_small_cnn(tmp_path / "cnn.onnx")
        both = farmctl("enqueue", "tune", "--model", str(model), "--n", "64")
        assert both.exit_code == 2 and "--n set a gemm to tune" in both.stderr
        capped = farmctl("enqueue", "tune", "--n", "64", "--max-tasks", "2")
        assert capped.exit_code == 2 and "--max-tasks" in capped.stderr
        missing = farmctl("enqueue", "tune", "--model", str(tmp_path / "none.onnx"))
        assert missing.exit_code == 2 and "Traceback" not in missing.output


class TestTuningProgress:
    def test_job_shows_tasks_trials_and_eta(self, farmctl: Callable[..., Result], store: Store,
                                            config: Path) -> None:
        """job ID --json and the table show each task's trials, best time and the time left."""
        job_id = store.enqueue({"kind": "tune", "params": {"gemm": {"n": 64}, "trials": 8}}, NOW)
        progress = TuneProgress(tune_work_dir(config.parent / "data", job_id))
        progress.set_tasks([TaskProgress("conv", 0, 4, 4, 1e-4), TaskProgress("dense", 1, 4, 1)])
        data = json.loads(farmctl("job", str(job_id), "--json").stdout)
        tuning = data["tuning"]
        totals = (tuning["tasks_done"], tuning["trials_measured"], tuning["trials_asked"])
        assert totals == (1, 5, 8)
        assert [t["best_s"] for t in tuning["tasks"]] == [1e-4, None]
        table = farmctl("job", str(job_id)).stdout
        assert "1/2 tasks done, 5/8 trials measured" in table and "dense" in table

    def test_other_jobs_have_no_tuning(self, farmctl: Callable[..., Result], store: Store) -> None:
        """A job without a work folder shows no tuning section."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        assert json.loads(farmctl("job", str(job_id), "--json").stdout)["tuning"] is None


class TestTuningOutcome:
    def test_job_leads_with_state_and_outcome_and_ends_with_a_one_line_spec(
        self, farmctl: Callable[..., Result], store: Store, config: Path
    ) -> None:
        """--trials 32 on 55 tasks searched nothing: job says best build untuned and why, no
        speed-up, 0 records and 0 picks, 32 of 55 tasks, a phase that ended; spec last."""
        job_id = finished_tune(store, nothing_searched_summary())
        progress = TuneProgress(tune_work_dir(config.parent / "data", job_id))
        progress.set_model_tasks(55)
        progress.set_tasks([TaskProgress(f"t{i}", i, 1, 0) for i in range(32)])
        progress.set_phase("timing the untuned and tuned builds")  # as the job left it before
        out = farmctl("job", str(job_id)).stdout
        lines = out.splitlines()
        assert lines[1].split("\t")[2] == "succeeded"  # the job's row first
        assert lines[2].startswith("best build: untuned (no tuning record applied (nothing "
                                   "was searched")
        assert "speed-up: none: no tuned build exists" in out
        assert "tuning records applied: 0 in the job's library" in out
        assert "picks checked against their default schedule: 0, used 0" in out
        assert "tasks tuned: 32 of the model's 55; trials measured 32/32" in out
        assert "1.10681" not in out and "0/55" not in out and "timing the" not in out
        assert ("tuning done: 32 of the model's 55 tasks tuned, 0 of them got all their "
                "planned trials") in out
        assert lines[-1].startswith("spec: {") and out.index("attempt") < out.index("spec: ")
        assert json.loads(lines[-1].removeprefix("spec: "))["kind"] == "tune"  # on one line
        data = json.loads(farmctl("job", str(job_id), "--json").stdout)
        assert data["job"]["spec"]["params"]["trials"] == 4 and data["tuning"]["model_tasks"] == 55

    def test_wait_names_the_best_build_without_a_speedup(
        self, farmctl: Callable[..., Result], store: Store
    ) -> None:
        """farmctl wait's line: each phone's median, then the best build; no speed-up where no
        tuned build exists."""
        job_id = finished_tune(store, nothing_searched_summary())
        out = farmctl("wait", str(job_id)).stdout
        assert out == f"job {job_id} succeeded: median 0.040 ms on R1 (n=3), best build untuned\n"


class TestTrialsAdvice:
    def test_trials_that_reach_no_search_batch_are_warned_and_queued(
        self, farmctl: Callable[..., Result], store: Store, tmp_path: Path
    ) -> None:
        """The small CNN has 7 tasks: --trials 8 leaves 1 candidate to search (the rest are
        default schedules), so enqueue warns and names the trials that reach a batch; the
        job is queued all the same. --trials 23 (7 defaults and a batch of 16) is quiet."""
        model = write_small_cnn(tmp_path / "cnn.onnx")
        few = farmctl("enqueue", "tune", "--model", str(model), "--trials", "8")
        assert few.exit_code == 0, few.output
        assert ("warning: --trials 8 cannot reach a search batch on cnn.onnx's 7 tasks: each "
                "tuned task's first trial measures its default schedule, so 1 candidate would "
                "be searched (a batch is 8); give --trials 23 or more") in few.stderr
        enough = farmctl("enqueue", "tune", "--model", str(model), "--trials", "23")
        assert enough.exit_code == 0 and "warning" not in enough.stderr
        fewer_tasks = farmctl("enqueue", "tune", "--model", str(model), "--trials", "3")
        assert ("0 candidates would be searched (a batch is 3), and 4 of them get no trial; "
                "give --trials 23 or more") in fewer_tasks.stderr
        assert len(store.list_jobs()) == 3
