"""Flat sample rows: each raw sample with its phone, its repetition and the phone's state."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta

from device_states import put_state

from farm.queue import DeviceState, Outcome, Store
from farm.queue.models import JobState
from farm.queue.records import JobView, ResultView, SnapshotData
from farm.queue.scheduler import Assignment
from farm.results.rows import SampleRow, latest_repetition, rows_of, sample_fields, sample_rows

NOW = datetime(2025, 1, 1, tzinfo=UTC)
FACTS = {"abi": "arm64-v8a", "model": "Pixel 7", "soc": "gs201"}


def _snap(serial: str, temp_c: float, status: int, attempt_id: int | None = 1) -> SnapshotData:
    return SnapshotData(serial, NOW, {"battery_temp_c": temp_c}, {"thermal_status": status},
                        FACTS, 0.0, attempt_id)


def run_on(store: Store, serials: tuple[str, ...], outcome: Outcome,
           run_id: str | None = None) -> int:
    """Enqueue a gemm on ``serials`` (alone or in a run), claim and finish it with ``outcome``."""
    for serial in serials:
        if store.get_device(serial) is None:
            store.upsert_device(serial, NOW, FACTS)
            put_state(store, serial, DeviceState.READY, "test", NOW)
    spec = {"kind": "gemm", "params": {"n": 64}, "devices": {"count": len(serials)}}
    if run_id is None:
        job_id = store.enqueue(spec, NOW)
    else:
        _, [job_id] = store.enqueue_run([spec], NOW)
    [claim] = store.claim([Assignment(job_id, serials, 60.0)], NOW)
    assert store.finish(claim.attempt.id, outcome, NOW + timedelta(seconds=5))
    return job_id


class TestRowsOf:
    def test_each_sample_gets_the_snapshot_of_its_run(self, store: Store) -> None:
        """Two runs of two samples on one phone: samples 0-1 take snapshot 0, 2-3 snapshot 1."""
        outcome = Outcome({"kind": "gemm"}, (1.0, 1.1, 1.2, 1.3), "s", ("A",) * 4,
                          (_snap("A", 30.0, 0), _snap("A", 38.5, 2)))
        job_id = run_on(store, ("A",), outcome)
        rows = sample_rows(store, job_ids=[job_id])
        assert [(r.index, r.readings["battery_temp_c"], r.readings["thermal_status"])
                for r in rows] == [
            (0, 30.0, 0), (1, 30.0, 0), (2, 38.5, 2), (3, 38.5, 2)]
        assert {(r.serial, r.model, r.soc, r.abi, r.workload, r.unit) for r in rows} == {
            ("A", "Pixel 7", "gs201", "arm64-v8a", "gemm n=64 float32", "s")}
        assert rows[0].finished_at == NOW + timedelta(seconds=5)

    def test_phones_keep_their_own_snapshots(self, store: Store) -> None:
        """Samples of two phones interleaved are paired with their own phone's snapshot."""
        outcome = Outcome({"kind": "gemm"}, (1.0, 2.0, 1.1, 2.1), "s", ("A", "B", "A", "B"),
                          (_snap("A", 30.0, 0), _snap("B", 40.0, 3)))
        job_id = run_on(store, ("A", "B"), outcome)
        rows = sample_rows(store, job_ids=[job_id])
        assert [(r.serial, r.readings["battery_temp_c"]) for r in rows] == [
            ("A", 30.0), ("B", 40.0), ("A", 30.0), ("B", 40.0)]

    def test_snapshots_of_other_attempts_are_ignored(self) -> None:
        """A snapshot of a failed earlier attempt does not describe this result's runs."""
        job = _job()
        result = ResultView(1, job.id, 2, {}, NOW, (1.0,), "s", ("A",), (0,))
        [row] = rows_of(job, result, [_snap("A", 45.0, 4, attempt_id=1)], {"A": FACTS})
        assert row.readings["battery_temp_c"] is None and row.model == "Pixel 7"

    def test_snapshots_before_unmeasured_work_are_skipped(self) -> None:
        """A tune job gates before tuning and before timing: samples take the later snapshot."""
        job = _job()
        result = ResultView(1, job.id, 1, {"runs": [{"serial": "A"}]}, NOW, (1.0, 1.1), "s",
                            ("A", "A"), (0, 0))
        rows = rows_of(job, result, [_snap("A", 30.0, 0), _snap("A", 41.0, 3)])
        assert [r.readings["battery_temp_c"] for r in rows] == [41.0, 41.0]

    def test_rerun_samples_keep_repetition_1(self, store: Store) -> None:
        """A noisy phone's re-run is stored with repetition 1, and latest_repetition keeps it."""
        outcome = Outcome({"kind": "gemm"}, (1.0, 3.0, 1.5, 1.6), "s", ("A",) * 4,
                          (_snap("A", 30.0, 0), _snap("A", 31.0, 0)),
                          sample_repetitions=(0, 0, 1, 1))
        job_id = run_on(store, ("A",), outcome)
        rows = sample_rows(store, job_ids=[job_id])
        assert [r.repetition for r in rows] == [0, 0, 1, 1]
        assert [r.value for r in latest_repetition(rows)] == [1.5, 1.6]


class TestSampleRows:
    def test_run_id_selects_the_runs_jobs(self, store: Store) -> None:
        """Rows of a run carry its id; jobs outside the run are left out."""
        outcome = Outcome({"kind": "gemm"}, (1.0,), "s", ("A",))
        alone = run_on(store, ("A",), outcome)
        in_run = run_on(store, ("A",), outcome, run_id="yes")
        run_id = store.get_job(in_run).run_id  # type: ignore[union-attr]
        assert run_id is not None and run_id.startswith("r-") and len(run_id) == 14
        rows = sample_rows(store, run_id=run_id)
        assert [(r.job_id, r.run_id) for r in rows] == [(in_run, run_id)]
        assert {r.job_id for r in sample_rows(store)} == {alone, in_run}

    def test_a_job_without_result_has_no_rows(self, store: Store) -> None:
        """A queued job gives no rows (nothing was measured)."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        assert sample_rows(store, job_ids=[job_id]) == []


def _job() -> JobView:
    return JobView(7, "gemm", {"kind": "gemm", "params": {"n": 64}}, JobState.SUCCEEDED, 0, NOW,
                   None, 3, 1, 60.0, (), None, NOW, None, "r-000000000001")


def test_sample_row_fields_match_the_csv_columns() -> None:
    """sample_fields names every SampleRow field in order, a phone's readings after the unit."""
    names = [f.name for f in fields(SampleRow) if f.name != "readings"]
    at = names.index("unit") + 1
    assert sample_fields() == [*names[:at], "battery_temp_c", "thermal_status", *names[at:]]


def test_a_row_goes_flat_and_back() -> None:
    """Each reading is a key of its own in the flat form, which reads back to the same row."""
    row = SampleRow(1, None, "A", None, None, None, "gemm", 0, 0, 1.0, "s", NOW,
                    readings={"battery_temp_c": 30.0, "thermal_status": 1})
    flat = row.flat()
    assert list(flat) == sample_fields() and flat["battery_temp_c"] == 30.0
    assert SampleRow.from_flat(flat) == row
