"""Two farmd hosts tune one model together; one is killed with -9 mid-task and the other
resumes its task from the database's records (issue 23's first "Must show").

Two farmd share one PostgreSQL database, each with two virtual phones of one model
(``[virtual] same_model``, one model on both hosts). A tune job of the small CNN's two
tasks starts on one host: its main attempt claims the heavier task's row (the other host
has idle phones of the model, so it shares, :class:`farm.tuning.work_progress.TaskWorkProgress`),
and the other host's farmd starts a helper attempt of the job on its phones
(:mod:`farm.queue.helpers`) that claims the other row: two live attempts on two hosts hold
the job's rows at once. Once the helper has checkpointed a record into the database
(:class:`farm.tuning.fleet_records.RecordCheckpoint`, after every batch) and before its task
is done, its farmd is killed with -9, its phones and its processes with it. Its lease
runs out; the main attempt, done with its own task, takes the helper's row over, seeds
its work folder with the helper's records (each counted against the task's trials, none
measured again) and tunes the rest; the job is neither retried nor failed by the
helper's death, and the tuned build is made once, by the main attempt.

Needs ``TEST_POSTGRES_URL``; makes a fresh database and drops it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest
from test_fleet_tune_model import measured_pairs
from test_jobs_tuning import complete_records
from test_multihost_pg import (
    HOSTS,
    PHONES,
    READY_DEADLINE_S,
    serials_ready,
    start_farmd,
    wait_started,
    write_config,
)

from farm.clock import wait_until
from farm.demo_model import write_small_cnn
from farm.procs import process_alive
from farm.queue.models import AttemptState, JobState
from farm.queue.records import AttemptView
from farm.queue.store import Store
from farm.testing import fresh_postgres_database, log_events
from farm.tuning import tune_work_dir
from farm.virtual.testing import adb_server

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.timeout(900)]

#: The tune attempts' lease: the killed host's helper stops holding its row this long
#: after its death. The main attempt leaves the helper's row to it for the whole test
#: (``tune_helper_wait_s``): under CI's load the main was done with its task before the
#: other host had started the helper, and took its row (CI run18).
TUNE_LEASE_S = 20.0
#: The untuned and tuned timings at the end: a few samples, no long warm-up (they are
#: not what this test checks).
RESULTS = ("[results]\nmin_samples = 2\nmax_samples = 3\nmin_measure_s = 0\n"
           "warmup_min_s = 0\nwarmup_max_s = 0.5\n")
DEADLINE_S = 600.0
#: 2 trials for each of the CNN's two convolutions, one per batch: the default
#: schedules first, then two searched candidates, so farmd is killed between
#: batches, with trials measured and trials left.
TRIALS = 4
TRIALS_PER_TASK = 2


@pytest.fixture
def pg_url(postgres_base_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database of its own, dropped after the test."""
    with fresh_postgres_database(postgres_base_url, "farm_multitune_") as url:
        yield url


def tune_spec(model: Path) -> dict[str, object]:
    """The CNN's two tasks, 2 trials each, in batches of 1, over two phones, 3 attempts."""
    return {"kind": "tune", "attempts": 3,
            "params": {"model": {"path": str(model), "number": 2, "repeat": 3},
                       "trials": TRIALS, "trials_per_task": TRIALS_PER_TASK, "max_tasks": 2,
                       "trials_per_batch": 1, "phones": PHONES}}


def start_hosts(pg_url: str, tmp_path: Path, stack: contextlib.ExitStack
                ) -> tuple[dict[str, subprocess.Popen[bytes]], Store]:
    """Both farmd, each with two ready phones of the one model; and a store on the database."""
    farmds, logs = {}, {}
    for host in HOSTS:
        server = stack.enter_context(adb_server())
        config = write_config(tmp_path / f"{host}.toml", host_id=host,
                              data_dir=tmp_path / host, database_url=pg_url,
                              adb_port=server.port)
        text = config.read_text(encoding="utf-8").replace(
            "[jobs]\n", f"[jobs]\ntune_lease_s = {TUNE_LEASE_S}\ntune_task_poll_s = 1\n"
            f"tune_helper_wait_s = {DEADLINE_S}\n")
        config.write_text(f"{text}\n[virtual]\nsame_model = true\n\n{RESULTS}",
                          encoding="utf-8")
        logs[host] = tmp_path / f"{host}.log"
        farmds[host] = start_farmd(config, logs[host], stack)
    wait_started(farmds, logs, DEADLINE_S)
    store = stack.enter_context(Store(pg_url, auto_migrate=False))
    wait_until(lambda: all(len(serials_ready(store, h)) == PHONES for h in HOSTS),
               READY_DEADLINE_S, "every host's phones ready")
    return farmds, store


def kill_host(farmd: subprocess.Popen[bytes]) -> None:
    """kill -9 a farmd, then what it started: its attempt, phones and servers go with the host."""
    descendants = psutil.Process(farmd.pid).children(recursive=True)
    os.kill(farmd.pid, signal.SIGKILL)
    farmd.wait(timeout=30)
    for child in descendants:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    wait_until(lambda: not any(process_alive(p) for p in descendants), 60,
               "the killed host's processes ended")


class TestTwoHostsTuneOneModel:
    def test_a_killed_helpers_task_resumes_on_the_other_host_measuring_no_trial_again(
        self, pg_url: str, tmp_path: Path
    ) -> None:
        """Both hosts hold the job's task rows at once; kill -9 of the helper's farmd
        mid-task: the main attempt takes its task over from its checkpointed records
        (no trace measured twice, each task exactly its trials) and builds once."""
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        with contextlib.ExitStack() as stack:
            farmds, store = start_hosts(pg_url, tmp_path, stack)
            models = {str(d.facts.get("model")) for d in store.list_devices()}
            assert len(models) == 1, models

            job_id = store.enqueue(tune_spec(model), datetime.now(UTC))

            def running(helper: bool) -> list[AttemptView]:
                return [a for a in store.attempts(job_id)
                        if a.helper is helper and a.state is AttemptState.RUNNING]

            def both_hold_rows() -> bool:
                live = {(a.id, a.host) for a in running(False) + running(True)}
                return len({(r.attempt_id, r.host) for r in store.task_work(job_id)} & live) == 2

            wait_until(both_hold_rows, DEADLINE_S, "the main attempt and a helper hold rows")
            [main], [helper] = running(False), running(True)
            assert main.host != helper.host and helper.serials, (main, helper)

            def helper_checkpointed() -> bool:
                return any(r.attempt_id == helper.id for r in store.tuning_records(job_id))

            wait_until(helper_checkpointed, DEADLINE_S, "a helper's trial checkpointed")
            kill_host(farmds[str(helper.host)])
            by_killed = [r for r in store.tuning_records(job_id) if r.attempt_id == helper.id]
            [held] = [r for r in store.task_work(job_id) if r.attempt_id == helper.id]
            assert held.state == "tuning" and held.trials_measured < TRIALS_PER_TASK, (
                "the helper's farmd was not killed mid-task", held)

            wait_until(lambda: store.get_job(job_id).state.ended,  # type: ignore[union-attr]
                       DEADLINE_S, "the tune job ended on the main attempt's host")
            job = store.get_job(job_id)
            assert job is not None and job.state is JobState.SUCCEEDED, job
            # The helper's death neither retried nor failed the job: one main attempt did it.
            assert {a.id: (a.state, a.helper) for a in store.attempts(job_id)} == {
                main.id: (AttemptState.SUCCEEDED, False),
                helper.id: (AttemptState.ABANDONED, True)}
            assert job.attempts_made == 1

            # The main attempt started the helper's task from its records, measured none again.
            [result] = store.results(job_id)
            summary = result.summary
            measured_by_killed = sum(1 for r in by_killed if min(r.record["record"][1]) < 1e9)
            assert summary["trials_from_fleet"] == measured_by_killed
            work_dir = tune_work_dir(tmp_path / str(main.host), job_id)
            pairs = measured_pairs(complete_records(work_dir))
            assert len(set(pairs)) == len(pairs), "a trial was measured twice"
            per_task = Counter(index for index, _ in pairs)
            assert [per_task[t["workload_index"]] for t in summary["tasks"]] == [
                TRIALS_PER_TASK] * 2
            kept = store.tuning_records(job_id)
            assert Counter(r.attempt_id for r in kept) == {
                helper.id: len(by_killed), main.id: len(kept) - len(by_killed)}
            # The tuned build was made once, by the main attempt; the helper never built.
            assert (work_dir / "model_tuned.so").is_file()
            killed_dir = tune_work_dir(tmp_path / str(helper.host), job_id)
            assert not (killed_dir / "model_tuned.so").exists()
            children = [c for h in HOSTS for c in (tmp_path / h / "runs").glob("*/child.log")]
            built = [e for c in children for e in log_events(c, "tuning_finished")]
            assert [e["attempt"] for e in built] == [main.id]
            # The main attempt holds both rows, done, and the job's one build row.
            rows = store.task_work(job_id)
            assert [(r.attempt_id, r.host, r.state, r.trials_measured) for r in rows] == [
                (main.id, main.host, "done", TRIALS_PER_TASK)] * 2, rows
            build = store.tune_build(job_id)
            assert build is not None and build[:2] == (main.id, main.host)
            assert build[2] is not None
