"""An exported model with a computed-shape Reshape: imported simplified, tuned on two phones
through an app crash, then its untuned and tuned builds compared per phone (issue 21's
"Must show").

TVM's ONNX frontend refuses the model as exported (tests/exported_models.py); farm
imports it simplified with its input shapes fixed and says so. Two virtual phones of
one model tune it with a tiny budget; phone 0's app crashes once the first trials are
measured. Every trial asked is measured once (counted in the records), and
``farmctl compare JOB:untuned JOB`` gives a verdict on each phone. The faults come
through the phone (the app's process is killed), never by patching.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from exported_models import write_computed_reshape
from test_fleet_tune_model import measured_pairs
from test_jobs_tuning import complete_records, measured_in

from farm.cli.main import cli
from farm.clock import wait_until
from farm.jobs.model_store import store_spec_models
from farm.queue.models import JobState
from farm.tuning import tune_work_dir
from farm.tvm.keys import job_key
from farm.tvm.tracker import summary

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.timeout(2700)]

TASKS = 2
#: Enough batches (of 2) that phone 0's crash, sent once the first trial is
#: measured, lands while the tuning still needs the phone: with 2 per task all
#: 4 were measured before the crash reached it, and the test checked nothing (on
#: a quiet host 12 trials of this model take 7 s).
TRIALS_PER_TASK = 8
#: Each wait's limit. At load 18 on 2 cores the first trial came 15 minutes in; on a
#: quiet host the whole test takes a few minutes (a wait ends when its condition holds).
DEADLINE_S = 1200.0
#: The untuned and tuned timings that end the job, and that compare reads: conftest's
#: PLUMBING_RESULTS, and a user's ``min_samples`` (10 a build and phone, 5 in each of the
#: two rounds) as the cap. At a user's cap of 60 each of the 8 runs (2 phones, 2 builds,
#: 2 rounds, one phone after the other) sampled for 7-12 s at load 8, the last 77 s of
#: the test.
RESULTS = {"warmup_min_s": 0.0, "min_measure_s": 0.0, "max_samples": 10}


def test_exported_model_tunes_through_a_crash_and_compares_per_phone(
    start_farmd: Callable[..., object], tmp_path: Path,
) -> None:
    """Simplified import said in the result; no trial lost to the crash; a verdict per phone."""
    running = start_farmd(2, same_model=True, results=RESULTS)
    store, settings = running.store, running.farmd.settings  # type: ignore[attr-defined]
    model = write_computed_reshape(tmp_path / "detector.onnx")
    raw = {"kind": "tune", "attempts": 3, "params": {
        "model": {"path": str(model), "input_shapes": {"images": [1, 3, 8, 8]},
                  "number": 2, "repeat": 6},
        "trials": TASKS * TRIALS_PER_TASK, "max_tasks": TASKS, "trials_per_batch": 2,
        "trials_per_task": TRIALS_PER_TASK,
        "phones": 2}}
    now = datetime.now(UTC)
    job_id = store.enqueue(store_spec_models(raw, ("params.model.path",), store, now), now)
    work_dir = tune_work_dir(running.data_dir, job_id)  # type: ignore[attr-defined]
    key = job_key(settings.tracker.key, job_id)

    def serving() -> int:
        with contextlib.suppress(Exception):
            return len(summary("127.0.0.1", settings.tracker.port).servers_for(key))
        return 0

    wait_until(lambda: serving() == 2, DEADLINE_S, "both phones serving the job")
    # The records file is read every 20 ms: the crash follows the first trial at once.
    wait_until(lambda: measured_in(complete_records(work_dir)) >= 1, DEADLINE_S,
               "the first trial measured", interval_s=0.02)
    serials = running.serials  # type: ignore[attr-defined]
    running.fleet.crash_app(serials[0])  # type: ignore[attr-defined]
    running.wait_finished([job_id], DEADLINE_S)  # type: ignore[attr-defined]
    view = store.get_job(job_id)
    assert view is not None and view.state is JobState.SUCCEEDED, view and view.error

    [result] = store.results(job_id)
    assert result.summary["model"] == "detector.onnx"
    assert result.summary["imported"].startswith("imported after simplification: ")
    assert "node 'floor' (Floor)" in result.summary["imported"]
    pairs = measured_pairs(complete_records(work_dir))
    assert len(set(pairs)) == len(pairs), "a trial was measured twice"
    assert sorted(Counter(index for index, _ in pairs).values()) == [TRIALS_PER_TASK] * TASKS
    assert result.summary["trials_measured"] == TASKS * TRIALS_PER_TASK
    # The crash was seen: the app relaunched mid-tune, or the attempt failed and resumed.
    assert serials[0] in result.summary["app_relaunches"] or result.summary["attempts"] >= 2

    config = tmp_path / "farmctl.toml"
    config.write_text(f'data_dir = "{running.data_dir}"\n')  # type: ignore[attr-defined]
    compared = CliRunner().invoke(cli, ["--config", str(config), "compare", f"{job_id}:untuned",
                                        str(job_id), "--json"], env={"FARM_CONFIG": None})
    # 0: none slower, 3: one slower, 4: one undecided (its reason given: a loaded
    # host can leave the samples too spread to decide; the tune job samples both
    # builds as a model job does, at least min_samples each).
    assert compared.exit_code in (0, 3, 4), compared.output
    report = json.loads(compared.stdout)
    assert (report["a"]["build"], report["b"]["build"]) == ("untuned", f"tuned by job {job_id}")
    verdicts = {p["serial"]: p["verdict"] for p in report["phones"]}
    assert sorted(verdicts) == sorted(serials)
    assert all(v in ("slower", "faster", "no change", "undecided")
               for v in verdicts.values()), verdicts
    assert all(p["reason"] for p in report["phones"] if p["verdict"] == "undecided"), report
