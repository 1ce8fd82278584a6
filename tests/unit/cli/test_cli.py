"""farmctl through click's CliRunner against a real SQLite queue in tmp_path."""

from __future__ import annotations

import csv
import io
import json
import threading
from datetime import UTC, datetime

from device_states import put_state
from stored_results import ab_job

from farm.clock import SystemClock, wait_until
from farm.errors import CompileError, SessionError
from farm.queue import DeviceState, Outcome, Store
from farm.queue.scheduler import Assignment
from farm.runner.wake import WAITERS_DIR, send_wake

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def finished_job(store: Store, samples: tuple[float, ...] = (0.5, 0.25)) -> int:
    """A gemm job that ran on phone R1 and stored a result."""
    store.upsert_device("R1", NOW, {"abi": "arm64-v8a", "sdk": 34})
    put_state(store, "R1", DeviceState.READY, "test", NOW)
    job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
    [claim] = store.claim([Assignment(job_id, ("R1",), 60.0)], NOW)
    store.finish(
        claim.attempt.id, Outcome({"kind": "gemm", "mean_s": 0.375, "gflops": 1.4}, samples), NOW
    )
    return job_id


class TestListings:
    def test_jobs_json(self, farmctl, store: Store) -> None:
        """jobs --json lists jobs newest first, states as words."""
        store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        store.enqueue({"kind": "gemm", "params": {"n": 128}}, NOW)
        rows = json.loads(farmctl("jobs", "--json").stdout)
        assert [r["id"] for r in rows] == [2, 1] and rows[0]["state"] == "queued"

    def test_jobs_table_and_json_show_each_jobs_workload(self, farmctl, store: Store) -> None:
        """jobs has a workload column, so two gemm jobs of different sizes tell apart."""
        store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        store.enqueue({"kind": "gemm", "params": {"n": 128, "dtype": "float16"}}, NOW)
        lines = [line.split("\t") for line in farmctl("jobs").stdout.splitlines()]
        column = lines[0].index("workload")
        assert [line[column] for line in lines[1:]] == ["gemm n=128 float16", "gemm n=64 float32"]
        rows = json.loads(farmctl("jobs", "--json").stdout)
        assert [r["workload"] for r in rows] == ["gemm n=128 float16", "gemm n=64 float32"]

    def test_jobs_table_filters_by_state(self, farmctl, store: Store) -> None:
        """jobs --state succeeded shows only finished jobs."""
        done = finished_job(store)
        store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        rows = json.loads(farmctl("jobs", "--state", "succeeded", "--json").stdout)
        assert [r["id"] for r in rows] == [done]
        assert "succeeded" in farmctl("jobs").stdout

    def test_job_shows_attempts_and_result(self, farmctl, store: Store) -> None:
        """job ID --json has the job, its attempts and its result with samples."""
        job_id = finished_job(store)
        data = json.loads(farmctl("job", str(job_id), "--json").stdout)
        assert data["job"]["state"] == "succeeded"
        assert [a["serials"] for a in data["attempts"]] == [["R1"]]
        assert data["result"]["samples"] == [0.5, 0.25]

    def test_unknown_job_exits_2(self, farmctl) -> None:
        """job 99 names the missing job."""
        result = farmctl("job", "99")
        assert result.exit_code == 2 and result.stderr == "Error: no job 99\n"

    def test_results_csv_has_one_line_per_sample(self, farmctl, store: Store) -> None:
        """results --format csv lists every raw sample with its result and job."""
        job_id = finished_job(store)
        rows = list(csv.DictReader(io.StringIO(farmctl("results", "--format", "csv").stdout)))
        assert [(r["job_id"], r["index"], float(r["value"])) for r in rows] == [
            (str(job_id), "0", 0.5), (str(job_id), "1", 0.25)]

    def test_results_json_and_table(self, farmctl, store: Store) -> None:
        """results --json has one row per raw sample; the table shows the phone's median."""
        job_id = finished_job(store)
        rows = json.loads(farmctl("results", "--job", str(job_id), "--json").stdout)
        assert [r["value"] for r in rows] == [0.5, 0.25]
        assert "375.000 ms" in farmctl("results").stdout

    def test_devices_json(self, farmctl, store: Store) -> None:
        """devices --json lists phones with state, health and facts."""
        finished_job(store)
        [row] = json.loads(farmctl("devices", "--json").stdout)
        assert row["serial"] == "R1" and row["state"] == "ready" and row["facts"]["sdk"] == 34

    def test_logs_show_device_events_and_attempt_errors(self, farmctl, store: Store) -> None:
        """logs --job lists the job's attempts, their errors and the device events they caused."""
        store.upsert_device("R1", NOW, {"abi": "x86_64"})
        store.upsert_device("R2", NOW, {"abi": "x86_64"})
        for serial in ("R1", "R2"):
            put_state(store, serial, DeviceState.READY, "health check passed", NOW)
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        [claim] = store.claim([Assignment(job_id, ("R1",), 60.0)], NOW)
        store.fail_attempt(claim.attempt.id, SessionError("R1", "connection reset"), NOW)
        entries = json.loads(farmctl("logs", "--job", str(job_id), "--json").stdout)
        texts = [e["text"] for e in entries]
        assert any("SessionError" in t and "connection reset" in t for t in texts)
        assert any(t.startswith("ready -> busy") for t in texts)
        assert all("health check passed" not in t for t in texts)
        serial_entries = json.loads(farmctl("logs", "--serial", "R2", "--json").stdout)
        assert [e["text"] for e in serial_entries] == [
            "- -> discovered (first seen)", "discovered -> ready (health check passed)"]


class TestJobControl:
    def test_cancel_then_cancel_again(self, farmctl, store: Store) -> None:
        """cancel ends a queued job; a second cancel says it already ended."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        assert farmctl("cancel", str(job_id)).exit_code == 0
        again = farmctl("cancel", str(job_id))
        assert again.exit_code == 1 and "already ended (cancelled)" in again.stderr

    def test_wait_succeeded_exits_0(self, farmctl, store: Store) -> None:
        """wait on a succeeded job exits 0 and prints its median and sample count."""
        job_id = finished_job(store)
        result = farmctl("wait", str(job_id))
        assert (result.exit_code, result.stdout) == (
            0, f"job {job_id} succeeded: median 375.000 ms (n=2)\n")

    def test_wait_and_results_show_the_same_median_of_the_same_samples(
            self, farmctl, store: Store) -> None:
        """Per phone, wait prints the median and n the results table shows: the re-run's only."""
        store.upsert_device("R2", NOW, {"abi": "arm64-v8a", "sdk": 34})
        put_state(store, "R2", DeviceState.READY, "test", NOW)
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}, "devices": {"count": 2}},
                               NOW)
        finished_job(store)  # R1 ready, and a first job whose samples must not count
        [claim] = store.claim([Assignment(job_id, ("R1", "R2"), 60.0)], NOW)
        # R1 measured once, noisy, then re-run; R2 once: the summary's mean pools all eight.
        samples = (0.9, 0.1, 0.8, 0.2, 0.01, 0.02, 0.03, 0.04)
        store.finish(claim.attempt.id, Outcome(
            {"kind": "gemm", "mean_s": sum(samples) / len(samples)}, samples,
            sample_serials=("R1",) * 6 + ("R2",) * 2, sample_repetitions=(0,) * 4 + (1, 1, 0, 0),
        ), NOW)
        waited = farmctl("wait", str(job_id))
        assert waited.stdout == (f"job {job_id} succeeded: median 15.000 ms on R1 (n=2), "
                                 "35.000 ms on R2 (n=2)\n")
        table = [line.split("\t") for line in
                 farmctl("results", "--job", str(job_id)).stdout.splitlines()]
        column = {name: i for i, name in enumerate(table[0])}
        assert [(row[column["phone"]], row[column["median"]], row[column["n"]])
                for row in table[1:]] == [("R1", "15.000 ms", "2"), ("R2", "35.000 ms", "2")]

    def test_wait_of_an_ab_job_gives_each_builds_median_per_phone(
            self, farmctl, store: Store) -> None:
        """An A/B job's builds are not pooled: wait prints A's and B's median on each phone."""
        job_id = ab_job(store, {"P1": [(0.010, 0.020)] * 10})
        waited = farmctl("wait", str(job_id))
        assert waited.stdout == (f"job {job_id} succeeded: median A 10.000 ms on P1 (n=10), "
                                 "B 20.000 ms on P1 (n=10)\n"), waited.output

    def test_wait_failed_exits_1(self, farmctl, store: Store) -> None:
        """wait on a failed job exits 1 with its error.

        The fault is the job's own (a compile error): a phone's first fault on
        each phone costs no attempt and would send the job to another phone.
        """
        store.upsert_device("R1", NOW, {"abi": "x86_64"})
        put_state(store, "R1", DeviceState.READY, "test", NOW)
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}, "attempts": 1}, NOW)
        [claim] = store.claim([Assignment(job_id, ("R1",), 60.0)], NOW)
        store.fail_attempt(claim.attempt.id, CompileError("gemm n=64", "no schedule"), NOW)
        result = farmctl("wait", str(job_id))
        assert result.exit_code == 1 and "cannot compile gemm n=64" in result.stderr

    def test_wait_wakes_when_the_job_ends(self, farmctl, store: Store, config) -> None:
        """wait sleeps on farmd's wake, not its poll: an hour's --poll still returns at the end."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        data_dir = config.parent / "data"

        def finish_when_waited() -> None:
            # The waiter's socket appears before it reads the job (farm.runner.wake.JobWaiter).
            wait_until(lambda: any((data_dir / WAITERS_DIR).glob("*.wake")), 20.0)
            store.cancel(job_id, NOW)
            send_wake(data_dir)  # what the attempt child does as it exits

        ender = threading.Thread(target=finish_when_waited)
        ender.start()
        result = farmctl("wait", str(job_id), "--poll", "3600", "--timeout", "30")
        ender.join()
        assert result.exit_code == 1 and "cancelled" in result.stderr
        assert not list((data_dir / WAITERS_DIR).glob("*.wake"))  # removed on the way out

    def test_wait_gives_up_after_timeout(self, farmctl, store: Store) -> None:
        """wait --timeout on a job that never runs exits 124 saying it is still queued."""
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
        result = farmctl("wait", str(job_id), "--timeout", "0.2", "--poll", "0.05")
        assert result.exit_code == 124 and "still queued" in result.stderr


class TestDeviceCommands:
    def test_drain_and_undrain(self, farmctl, store: Store) -> None:
        """drain sets the flag (the phone gets no work); undrain clears it."""
        store.upsert_device("R1", NOW)
        assert farmctl("drain", "R1").exit_code == 0
        assert store.get_device("R1").drained  # type: ignore[union-attr]
        assert farmctl("undrain", "R1").exit_code == 0
        assert not store.get_device("R1").drained  # type: ignore[union-attr]

    def test_unknown_serial_is_refused(self, farmctl, store: Store) -> None:
        """drain of a phone never seen exits 2 and creates no device row."""
        result = farmctl("drain", "nope")
        assert result.exit_code == 2 and "no phone 'nope'" in result.stderr
        assert store.list_devices() == []

    def test_release_from_quarantine(self, farmctl, store: Store) -> None:
        """release moves a quarantined phone back to discovered with unknown health."""
        now = SystemClock().now()
        store.upsert_device("R1", now)
        put_state(store, "R1", DeviceState.QUARANTINED, "5 recoveries failed", now)
        assert farmctl("release", "R1").exit_code == 0
        record = store.get_device("R1")
        assert record is not None and record.state is DeviceState.DISCOVERED
        assert record.health.value == "unknown"

    def test_release_of_a_healthy_phone_is_refused(self, farmctl, store: Store) -> None:
        """release of a phone that is not quarantined exits 2 and changes nothing."""
        store.upsert_device("R1", NOW)
        put_state(store, "R1", DeviceState.READY, "ok", NOW)
        result = farmctl("release", "R1")
        assert result.exit_code == 2 and "not quarantined (it is ready)" in result.stderr


class TestTypos:
    def test_a_mistyped_command_suggests_the_right_one(self, farmctl) -> None:
        """farmctl enqeue: exit 2, and the error names the command meant."""
        result = farmctl("enqeue", "gemm")
        assert result.exit_code == 2
        assert result.stderr.splitlines()[-1] == (
            "Error: No such command 'enqeue'. Did you mean 'enqueue'?")

    def test_a_name_like_no_command_suggests_nothing(self, farmctl) -> None:
        """A word far from every command is refused without a guess."""
        result = farmctl("frobnicate")
        assert (result.exit_code, result.stderr.splitlines()[-1]) == (
            2, "Error: No such command 'frobnicate'.")
