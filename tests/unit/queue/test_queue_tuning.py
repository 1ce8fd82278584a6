"""The fleet's tuning records in the database (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from queue_helpers import ARM64, add_ready, gemm_spec

from farm.config import Settings
from farm.jobs.tuning_db import RECORDS_FILE, WORKLOADS_FILE
from farm.kinds.run import RunContext
from farm.kinds.tune_model import attempt_records
from farm.queue import Assignment, Store, tuning
from farm.queue.records import SnapshotData
from farm.queue.tuning import FleetRecord, record_key
from farm.tuning.fleet_records import RecordCheckpoint
from farm.tuning.search import trace_key

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TARGET = json.dumps({"keys": ["cpu"], "kind": "llvm", "num-cores": 4}, sort_keys=True)
OTHER_TARGET = json.dumps({"keys": ["cpu"], "kind": "llvm", "num-cores": 8}, sort_keys=True)
WORKLOADS = {"111": "bW9kdWxlIDE=", "222": "bW9kdWxlIDI="}


def record(shash: str, trace: int, run_s: float | None, *, model: str = "Pixel 7",
           target: str = TARGET) -> FleetRecord:
    """A record of workload ``shash`` whose trace is ``[[trace], []]``; None: failed."""
    secs = [1e10] if run_s is None else [run_s, run_s]
    body: list[Any] = [[[trace], []], secs, json.loads(target), []]
    return FleetRecord(shash, target, model, body, run_s,
                       record_key(shash, target, model, str(trace)), f"task {shash}")


class TestKeep:
    def test_a_record_is_kept_once_whoever_stores_it_again(self, store: Store) -> None:
        """Storing the same records again (a seeded job, a second import) adds none;
        a new trace of the same workload is added."""
        first = [record("111", 1, 0.002), record("111", 2, 0.001), record("222", 3, None)]
        assert store.keep_tuning_records(WORKLOADS, first, None, None, T0) == 3
        assert store.keep_tuning_records(WORKLOADS, first, None, None, T0) == 0
        assert store.keep_tuning_records(WORKLOADS, [first[0], record("111", 4, 0.003)],
                                         None, None, T0) == 1
        workloads, records = store.fleet_database()
        assert workloads == {"111": WORKLOADS["111"]}  # 222 has no measured record
        assert [r[0][0][0] for _, r in records] == [1, 2, 4]  # measured only, in order stored

    def test_the_same_trace_on_another_model_is_another_record(self, store: Store) -> None:
        """Records are per device model: the same trace on another phone model is kept too."""
        kept = store.keep_tuning_records(
            WORKLOADS, [record("111", 1, 0.002), record("111", 1, 0.005, model="Galaxy S23")],
            None, None, T0)
        assert kept == 2


    def test_records_are_written_in_chunks_each_once(self, store: Store,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
        """Many records go in statements of a few (SQLite's bound-parameter limit), a record
        repeated in a later chunk still kept once."""
        monkeypatch.setattr(tuning, "_CHUNK", 2)
        many = [record("111", i, 0.001 * (i + 1)) for i in range(5)] + [record("111", 0, 0.001)]
        assert store.keep_tuning_records(WORKLOADS, many, None, None, T0) == 5
        assert len(store.fleet_database()[1]) == 5


class TestBest:
    def test_best_records_fastest_first_of_one_model_and_target(self, store: Store) -> None:
        """The fleet serves each workload's fastest measured records, at most as many as asked,
        only those of the asked device model and target; failed ones never."""
        store.keep_tuning_records(WORKLOADS, [
            record("111", 1, 0.003), record("111", 2, 0.001), record("111", 3, 0.002),
            record("111", 4, None), record("111", 5, 0.0001, model="Galaxy S23"),
            record("111", 6, 0.0001, target=OTHER_TARGET), record("222", 7, 0.004),
        ], None, None, T0)
        best = store.best_tuning_records({"111": 2, "222": 5, "333": 5}, TARGET, "Pixel 7")
        assert [r[0][0][0] for r in best["111"]] == [2, 3]
        assert [r[0][0][0] for r in best["222"]] == [7]
        assert "333" not in best
        assert best["111"][0][1] == [0.001, 0.001]  # the record JSON as MetaSchedule wrote it

    def test_summaries_count_trials_and_failures_per_model(self, store: Store) -> None:
        """One summary per workload, target and device model: best latency, measured, failed."""
        store.keep_tuning_records(WORKLOADS, [
            record("111", 1, 0.003), record("111", 2, 0.001), record("111", 3, None),
            record("111", 4, 0.002, model="Galaxy S23"),
        ], None, None, T0)
        rows = store.tuning_record_summaries()
        assert [(r.device_model, r.shash, r.best_s, r.trials, r.failed) for r in rows] == [
            ("Galaxy S23", "111", 0.002, 1, 0), ("Pixel 7", "111", 0.001, 2, 1)]
        assert rows[1].label == "task 111"
        assert [r.device_model for r in store.tuning_record_summaries("Pixel 7")] == ["Pixel 7"]


class TestAttempt:
    def test_an_attempt_gets_its_models_best_and_keeps_its_work_folder(
        self, store: Store, tmp_path: Path
    ) -> None:
        """A tune attempt is served the best records of its phones' model (another model's
        faster one is not), and every record of its work folder is kept under that model and
        its job when it ends, even by an error."""
        store.keep_tuning_records(WORKLOADS, [record("111", 1, 0.002),
                                              record("111", 2, 0.0001, model="Galaxy S23")],
                                  None, None, T0)
        add_ready(store, "P1", facts={**ARM64, "model": "Pixel 7"})
        job_id = store.enqueue(gemm_spec(), T0)
        (claim,) = store.claim([Assignment(job_id, ("P1",), 60.0)], T0)
        ctx = RunContext(Settings(), claim.job, claim.attempt, {"P1": {"model": "Pixel 7"}},
                         lambda serial: SnapshotData(serial, T0), store)
        (tmp_path / WORKLOADS_FILE).write_text('["111", "bW9kdWxlIDE="]\n')
        (tmp_path / RECORDS_FILE).write_text(
            json.dumps([0, [[[9], []], [0.003], json.loads(TARGET), []]]) + "\n")
        served = []

        def tune() -> None:
            with attempt_records(ctx, tmp_path, {0: "task a"}, "stem") as fleet:
                assert fleet is not None
                served.extend(r[0] for r in fleet(TARGET, {"111": 5})["111"])
                raise RuntimeError("the tuning failed")

        with pytest.raises(RuntimeError):
            tune()
        assert served == [[[1], []]]
        [kept] = store.tuning_records(job_id)
        assert (kept.workload, kept.record["record"][0]) == ("task a", [[9], []])
        assert {(s.device_model, s.trials) for s in store.tuning_record_summaries()} == {
            ("Pixel 7", 2), ("Galaxy S23", 1)}

    def test_a_checkpoint_keeps_each_batchs_new_records_as_they_are_measured(
        self, store: Store, tmp_path: Path
    ) -> None:
        """After each batch only the lines past those kept are stored, under the job and its
        attempt and labelled by task; a record seeded from the fleet is not stored again;
        a folder that cannot be read is logged, and its lines are kept at the next batch."""
        add_ready(store, "P1", facts={**ARM64, "model": "Pixel 7"})
        job_id = store.enqueue(gemm_spec(), T0)
        (claim,) = store.claim([Assignment(job_id, ("P1",), 60.0)], T0)
        seeded = replace(record("111", 1, 0.002),
                         key=record_key("111", TARGET, "Pixel 7", trace_key([[1], []])))
        store.keep_tuning_records(WORKLOADS, [seeded], None, None, T0)
        checkpoint = RecordCheckpoint(store, tmp_path, "Pixel 7", job_id, claim.attempt.id,
                                      "tune model m.onnx")
        (tmp_path / WORKLOADS_FILE).write_text('["111", "bW9kdWxlIDE="]\n')
        lines = tmp_path / RECORDS_FILE

        def append(trace: int) -> None:
            with lines.open("a") as out:
                out.write(json.dumps([0, [[[trace], []], [0.003], json.loads(TARGET), []]]) + "\n")

        append(1)  # the seeded record
        append(2)
        checkpoint({0: "conv"})
        assert [r.record["record"][0] for r in store.tuning_records(job_id)] == [[[2], []]]
        assert checkpoint.lines_kept == 2
        with lines.open("a") as out:
            out.write("[0, not json]\n")
        checkpoint({0: "conv"})
        assert checkpoint.lines_kept == 2
        lines.write_text("".join(lines.read_text().splitlines(keepends=True)[:2]))
        append(3)
        checkpoint({0: "conv"})
        kept = store.tuning_records(job_id)
        assert [(r.workload, r.attempt_id, r.record["record"][0]) for r in kept] == [
            ("tune model m.onnx conv", claim.attempt.id, [[2], []]),
            ("tune model m.onnx conv", claim.attempt.id, [[3], []])]
