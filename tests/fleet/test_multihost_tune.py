"""A model's tuning resumed on another farmd host after kill -9, from the database's records
(issue 23's first "Must show", the part that landed: one attempt tunes a job's tasks, so
the two hosts do not yet tune one model at the same time).

Two farmd share one PostgreSQL database, each with two virtual phones of one model
(``[virtual] same_model``, one model on both hosts). A tune job of the small CNN's two
tasks starts on one host; once that attempt has checkpointed a record into the database
(:class:`farm.kinds.tune_fleet.RecordCheckpoint`, after every batch) and before its tasks
are done, its farmd is killed with -9, its phones and its attempt's processes with it.
Its lease runs out, the other host's reap requeues the job, and the retry, on the other
host with an empty work folder, starts from the killed attempt's records: each is counted
against its task's trials and none is measured again; the tuned build is made once, by
the retry. The job's task work rows (:mod:`farm.queue.task_work`) follow: held by the
killed attempt at the kill, claimed by the retry once its lease ran out, done at the end,
and the job's one build row is the retry's.

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
    log_events,
    serials_ready,
    start_farmd,
    write_config,
)

from farm.clock import wait_until
from farm.demo_model import write_small_cnn
from farm.kinds.run import tune_work_dir
from farm.procs import process_alive
from farm.queue.models import AttemptState, JobState
from farm.queue.store import Store
from farm.testing import fresh_postgres_database
from farm.virtual.testing import adb_server

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.timeout(900)]

#: The tune attempt's lease: the killed host's attempt is requeued this long after its death.
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
            "[jobs]\n", f"[jobs]\ntune_lease_s = {TUNE_LEASE_S}\n")
        config.write_text(f"{text}\n[virtual]\nsame_model = true\n\n{RESULTS}",
                          encoding="utf-8")
        logs[host] = tmp_path / f"{host}.log"
        farmds[host] = start_farmd(config, logs[host], stack)
    wait_until(lambda: all(log_events(logs[h], "farmd_started") for h in HOSTS),
               READY_DEADLINE_S, "both farmd started")
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


class TestTuneResumesOnAnotherHost:
    def test_a_killed_hosts_tuning_resumes_elsewhere_measuring_no_recorded_trial_again(
        self, pg_url: str, tmp_path: Path
    ) -> None:
        """kill -9 of the farmd tuning mid-task: the job's retry runs on the other host, seeds
        its empty work folder with the killed attempt's checkpointed records, measures only
        the trials left (no trace twice, each task exactly its trials), builds once."""
        model = write_small_cnn(tmp_path / "small_cnn.onnx")
        with contextlib.ExitStack() as stack:
            farmds, store = start_hosts(pg_url, tmp_path, stack)
            models = {str(d.facts.get("model")) for d in store.list_devices()}
            assert len(models) == 1, models

            job_id = store.enqueue(tune_spec(model), datetime.now(UTC))

            def checkpointed() -> int:
                return len(store.tuning_records(job_id))

            wait_until(lambda: checkpointed() >= 1, DEADLINE_S, "a trial checkpointed")
            [first] = store.attempts(job_id)
            killed = first.host
            kill_host(farmds[killed])
            by_killed = store.tuning_records(job_id)
            assert 1 <= len(by_killed) < TRIALS, "farmd was not killed mid-task"
            assert {r.attempt_id for r in by_killed} == {first.id}
            # Its tasks were task work rows the killed attempt held, not all done.
            rows = store.task_work(job_id)
            assert len(rows) == 2 and {(r.attempt_id, r.host) for r in rows} == {
                (first.id, killed)}, rows
            assert any(r.state == "tuning" for r in rows), rows

            wait_until(lambda: store.get_job(job_id).state.ended,  # type: ignore[union-attr]
                       DEADLINE_S, "the tune job ended on the other host")
            job = store.get_job(job_id)
            assert job is not None and job.state is JobState.SUCCEEDED, job
            attempts = store.attempts(job_id)
            assert attempts[0].state is AttemptState.ABANDONED
            [last] = [a for a in attempts if a.state is AttemptState.SUCCEEDED]
            other = next(h for h in HOSTS if h != killed)
            assert last.host == other

            # The retry started from the killed attempt's records and measured none again.
            [result] = store.results(job_id)
            summary = result.summary
            measured_by_killed = sum(1 for r in by_killed if min(r.record["record"][1]) < 1e9)
            assert summary["trials_from_fleet"] == measured_by_killed
            work_dir = tune_work_dir(tmp_path / other, job_id)
            pairs = measured_pairs(complete_records(work_dir))
            assert len(set(pairs)) == len(pairs), "a trial was measured twice"
            per_task = Counter(index for index, _ in pairs)
            assert [per_task[t["workload_index"]] for t in summary["tasks"]] == [
                TRIALS_PER_TASK] * 2
            kept = store.tuning_records(job_id)
            assert Counter(r.attempt_id for r in kept) == {
                first.id: len(by_killed), last.id: len(kept) - len(by_killed)}
            # The tuned build was made once, by the retry: the killed host never built it.
            assert (work_dir / "model_tuned.so").is_file()
            assert not (tune_work_dir(tmp_path / killed, job_id) / "model_tuned.so").exists()
            children = [c for h in HOSTS for c in (tmp_path / h / "runs").glob("*/child.log")]
            built = [e for c in children for e in log_events(c, "tuning_finished")]
            assert [e["attempt"] for e in built] == [last.id]
            # The retry claimed the killed attempt's task rows, finished them, and held the
            # job's one build row; progress read from the database shows them done.
            rows = store.task_work(job_id)
            assert [(r.attempt_id, r.host, r.state, r.trials_measured) for r in rows] == [
                (last.id, other, "done", TRIALS_PER_TASK)] * 2, rows
            build = store.tune_build(job_id)
            assert build is not None and build[:2] == (last.id, other) and build[2] is not None
            assert {d.host for s in summary["phones"] if (d := store.get_device(s))} == {other}
