"""Tuning jobs that survive app crashes and a farmd killed mid-run (issue 6's "Must show").

Both tests run a MetaSchedule tuning job of a small GEMM over two virtual
phones through farm's queue, with farmd provisioning the phones. Faults come
through the phones and the processes, never by patching: ``Fleet.crash_app``
kills the TVM RPC app as an uncaught exception would, and farmd is killed with
SIGKILL like a crashed daemon. Each takes a few minutes on 2 cores.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest
import sqlalchemy as sa

from farm.clock import wait_until
from farm.fleet.history import reason_of
from farm.jobs.tuning_db import FAILED_RUN_S, RECORDS_FILE
from farm.procs import process_alive, signal_group
from farm.provision.standin import demo_apk
from farm.queue.models import AttemptState, DeviceState, JobState, Sample
from farm.queue.store import Store
from farm.supervise import Failure, LadderPolicy, Recovery, Step
from farm.tuning import tune_work_dir
from farm.tvm.keys import job_key, phone_key
from farm.tvm.tracker import TrackerProcess, summary
from farm.virtual.android.spec import profiles
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

pytestmark = [pytest.mark.fleet, pytest.mark.slow]

TRIALS = 8
TUNE_DEADLINE_S = 480.0
WATCH_POLL_S = 0.2


def tune_spec(trials: int = TRIALS) -> dict[str, Any]:
    """A tuning job of a 64x64 GEMM over two phones, measured in batches of four."""
    return {"kind": "tune", "attempts": 3,
            "params": {"gemm": {"n": 64, "number": 2, "repeat": 3}, "trials": trials,
                       "trials_per_batch": 4, "phones": 2}}


def complete_records(work_dir: Path) -> bytes:
    """The tuning records file up to its last complete line (a writer may be mid-line)."""
    path = work_dir / RECORDS_FILE
    data = path.read_bytes() if path.is_file() else b""
    return data[: data.rfind(b"\n") + 1]


def measured_in(records: bytes) -> int:
    """Records whose measurement succeeded (run times below MetaSchedule's failure cost)."""
    import json

    count = 0
    for line in records.splitlines():
        run_secs = json.loads(line)[1][1] if line.strip() else None
        if run_secs and all(float(s) < FAILED_RUN_S for s in run_secs):
            count += 1
    return count


def sample_serials(data_dir: Path, result_id: int) -> list[str | None]:
    """The serial stored with each raw sample of a result."""
    engine = sa.create_engine(f"sqlite:///{data_dir / 'farm.db'}")
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.select(Sample.serial).where(Sample.result_id == result_id))
            return [row.serial for row in rows]
    finally:
        engine.dispose()


def crash_in_turn(  # type: ignore[no-untyped-def]
    farm, work_dir: Path, key: str, crashes: list[tuple[str, int]], stop: threading.Event
) -> None:
    """Crash phone 0's app once the first batch is measured, then phone 1's once phone 0
    serves the job's ``key`` again: both while trials remain. Each crash is appended to
    ``crashes`` as (serial, trials measured then); ``work_dir`` is the job's."""
    tracker = farm.farmd.settings.tracker

    def serving() -> int:
        return len(summary(tracker.host, tracker.port).servers_for(key))

    end_s = time.monotonic() + TUNE_DEADLINE_S
    for serial in farm.serials:
        floor = crashes[-1][1] if crashes else 1
        while not stop.is_set() and time.monotonic() < end_s:
            with contextlib.suppress(Exception):
                measured = measured_in(complete_records(work_dir))
                if serving() == 2 and floor <= measured < TRIALS:
                    farm.fleet.crash_app(serial)
                    crashes.append((serial, measured))
                    break
            stop.wait(WATCH_POLL_S)
        # The tracker must notice the crash before the next phone's turn.
        while not stop.is_set() and time.monotonic() < end_s:
            with contextlib.suppress(Exception):
                if serving() < 2:
                    break
            stop.wait(WATCH_POLL_S)


class TestTuningThroughAppCrashes:
    def test_app_killed_twice_mid_run_still_measures_every_trial(self, start_farmd) -> None:  # type: ignore[no-untyped-def]
        """The app is crashed on each phone in turn while tuning; the farm brings it back and the
        job measures all its trials."""
        farm = start_farmd(2, same_model=True)
        tracker = farm.farmd.settings.tracker
        job_id = farm.enqueue(tune_spec())
        work_dir = tune_work_dir(farm.data_dir, job_id)
        key = job_key(tracker.key, job_id)
        crashes: list[tuple[str, int]] = []
        stop = threading.Event()

        watcher = threading.Thread(target=crash_in_turn, args=(farm, work_dir, key, crashes, stop),
                                   name="crash-watcher", daemon=True)
        watcher.start()
        try:
            farm.wait_finished([job_id], TUNE_DEADLINE_S)
        finally:
            stop.set()
            watcher.join(timeout=30)

        view = farm.store.get_job(job_id)
        assert view.state is JobState.SUCCEEDED, view.error  # type: ignore[union-attr]
        assert [serial for serial, _ in crashes] == farm.serials
        assert all(measured < TRIALS for _, measured in crashes)
        [result] = farm.store.results(job_id)
        summary_ = result.summary
        assert summary_["trials_requested"] == TRIALS
        assert summary_["trials_measured"] >= TRIALS
        assert sorted(summary_["app_relaunches"]) == sorted(farm.serials)
        # Figures per phone, never averaged over phones (so no top-level speedup with two).
        assert sorted(summary_["per_serial"]) == sorted(farm.serials)
        assert all(f["speedup"] > 0 for f in summary_["per_serial"].values())
        assert summary_["speedup"] is None
        # Each phone timed the untuned and the tuned kernel on its own key: every
        # sample is stored with the serial that produced it (3 repeats per phone).
        assert sorted(run["serial"] for run in summary_["runs"]) == sorted(farm.serials)
        assert sorted(sample_serials(farm.data_dir, result.id)) == sorted(farm.serials * 3)
        assert summary_["attempts"] == 1
        assert summary_["rounds"] >= 1 and summary_["batches"] >= TRIALS // 4
        assert measured_in(complete_records(work_dir)) == summary_["trials_measured"]
        assert len(farm.store.tuning_records(job_id)) == len(
            complete_records(work_dir).splitlines()
        )
        # Afterwards every phone serves its own key again and is ready for work: reconcile
        # moves each back once the job has ended (its relaunch and registration take
        # seconds), so the check waits for it rather than reading the tracker once.
        own = {phone_key(tracker.key, s) for s in farm.serials}
        def serving_own() -> set[str]:
            listed = {s.key for s in summary(tracker.host, tracker.port).servers}
            return listed if own <= listed else set()

        listed = wait_until(serving_own, 60, "every phone serving its own key again after the tune")
        assert listed is not None and key not in listed
        farm.wait_ready(60)


    def test_app_crash_due_quarantine_while_serving_the_job_key_is_healed(  # type: ignore[no-untyped-def]
        self, start_farmd
    ) -> None:
        """A phone with four recent incidents behind it (its next is due quarantine at the
        defaults) has its app crashed while it serves a one-phone tune's key: farmd relaunches
        it under the job key rather than skip it for being busy, and the tune finishes."""
        farm = start_farmd(1)
        [serial] = farm.serials
        tracker = farm.farmd.settings.tracker
        ago = datetime.now(UTC) - timedelta(minutes=10)
        for n in range(LadderPolicy().quarantine_after - 1):  # not healed by the first relaunch
            at = ago + timedelta(minutes=n)
            for event in (Failure(at, "app_running false"),
                          Recovery(at + timedelta(seconds=1), Step.RESTART_APP, ok=False),
                          Recovery(at + timedelta(seconds=5), Step.FORCE_STOP_RELAUNCH, ok=True)):
                farm.store.add_device_event(serial, reason_of(event), event.at)
        spec = tune_spec()
        spec["params"]["phones"] = 1
        job_id = farm.enqueue(spec)
        key = job_key(tracker.key, job_id)

        def serving() -> int:
            return len(summary(tracker.host, tracker.port).servers_for(key))

        def served() -> bool:  # registered, and farmd's serve task over (not crashed under it)
            device = farm.store.get_device(serial)
            return (serving() == 1 and device.serving_key == key  # type: ignore[union-attr]
                    and not farm.farmd.manager.runtime(serial).busy_task)

        wait_until(served, TUNE_DEADLINE_S, "the phone serving the job's key")
        farm.fleet.crash_app(serial)  # tuning has just begun: its candidates build first
        wait_until(lambda: not serving(), 30, "the crashed app leaving the tracker")
        wait_until(serving, 60, "the app relaunched under the job's key")
        farm.wait_finished([job_id], TUNE_DEADLINE_S)
        view = farm.store.get_job(job_id)
        assert view.state is JobState.SUCCEEDED, view.error  # type: ignore[union-attr]
        [result] = farm.store.results(job_id)
        assert result.summary["app_relaunches"] == [serial]
        assert result.summary["attempts"] == 1


# --- farmd killed mid-run -----------------------------------------------------------------


def farmd_config(
    path: Path, *, data_dir: Path, adb_port: int, tracker_port: int, apk: Path,
    results: str = "",
) -> Path:
    """A farmd TOML config for lan phones, an external tracker and short leases.

    Virtual lan phones reach the host at 10.0.2.2, the Android emulator's alias
    for the host's loopback (farm.virtual.net). ``results`` is a ``[results]``
    section appended as given ("": a user's defaults).
    """
    path.write_text(
        f'data_dir = "{data_dir}"\nlog_level = "info"\n\n'
        f"[adb]\nport = {adb_port}\n\n"
        f'[apk]\npath = "{apk}"\n\n'
        f'[tracker]\nexternal = true\nport = {tracker_port}\nnetwork = "lan"\n'
        'phone_host = "10.0.2.2"\n\n'
        "[metrics]\nenabled = false\n\n"
        "[api]\nenabled = false\n\n"
        "[health]\ninterval_s = 5\n\n"
        "[jobs]\ntune_lease_s = 8\n"
        f"{results}",
        encoding="utf-8",
    )
    return path


#: farmd's stop on SIGTERM, tune running, must take at most this (issue 25; 2 minutes before).
STOP_DEADLINE_S = 10.0


class TestTuningThroughFarmdRestart:
    @pytest.mark.parametrize("stop_signal", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
    def test_farmd_killed_mid_run_resumes_and_loses_no_trial(
        self, adb_server: AdbServerHandle,
        farmd_process: Callable[[Path, Path], subprocess.Popen[bytes]],
        tmp_path: Path, stop_signal: signal.Signals,
    ) -> None:
        """After farmd is SIGKILLed (or stopped by SIGTERM, within 10 s) mid-tuning and started
        again, the job resumes from its records and keeps every measured trial."""
        with contextlib.ExitStack() as stack:
            tracker = stack.enter_context(TrackerProcess.start(log_path=tmp_path / "tracker.log"))
            specs = [profiles(1, "lan")[0]] * 2
            fleet = stack.enter_context(Fleet(2, specs=specs, adb_port=adb_server.port,
                                              data_dir=tmp_path / "phones"))
            data_dir = tmp_path / "farm"
            config = farmd_config(
                tmp_path / "farm.toml",
                data_dir=data_dir,
                adb_port=adb_server.port,
                tracker_port=tracker.port,
                apk=demo_apk(tmp_path / "apk"),
            )
            first = farmd_process(config, tmp_path / "farmd-1.log")
            wait_until((data_dir / "farm.db").is_file, 60, "farmd created its database")
            store = Store(f"sqlite:///{data_dir / 'farm.db'}")
            stack.callback(store.close)

            def all_ready() -> bool:
                return all((d := store.get_device(s)) is not None and d.state is DeviceState.READY
                           for s in fleet.serials)

            wait_until(all_ready, 150, "phones ready under the first farmd")
            job_id = store.enqueue(tune_spec(), datetime.now(UTC))
            work_dir = tune_work_dir(data_dir, job_id)
            wait_until(lambda: measured_in(complete_records(work_dir)) > 0, TUNE_DEADLINE_S,
                       "first batch of trials measured")

            descendants = psutil.Process(first.pid).children(recursive=True)
            if stop_signal is signal.SIGKILL:
                signal_group(first.pid)  # farmd and everything of its process group
                first.wait(timeout=30)
            else:  # what systemd sends: farmd alone, which must stop the rest itself
                stopping_s = time.monotonic()
                first.send_signal(signal.SIGTERM)
                first.wait(timeout=60)
                assert time.monotonic() - stopping_s <= STOP_DEADLINE_S
                assert first.returncode == 0
            wait_until(lambda: not any(process_alive(p) for p in descendants), 60,
                       "farmd's children ended")
            kept = complete_records(work_dir)
            measured_before = measured_in(kept)
            assert 0 < measured_before < TRIALS

            farmd_process(config, tmp_path / "farmd-2.log")
            wait_until(lambda: store.get_job(job_id).state.ended, TUNE_DEADLINE_S,  # type: ignore[union-attr]
                       "job finished under the second farmd")

            view = store.get_job(job_id)
            assert view.state is JobState.SUCCEEDED, view.error  # type: ignore[union-attr]
            attempts = store.attempts(job_id)
            assert attempts[0].state is AttemptState.ABANDONED
            assert attempts[-1].state is AttemptState.SUCCEEDED
            records = complete_records(work_dir)
            assert records.startswith(kept)
            [result] = store.results(job_id)
            assert result.summary["trials_measured_before"] >= measured_before
            # The counters add up both farmds' attempts (the first one's batches too).
            assert result.summary["attempts"] >= 2
            assert result.summary["batches"] >= TRIALS // 4
            assert result.summary["trials_measured"] >= TRIALS
            assert measured_in(records) == result.summary["trials_measured"]
