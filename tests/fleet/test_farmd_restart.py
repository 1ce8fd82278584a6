"""farmd killed with -9 mid-tuning and started again at once (issue 10's "Must show").

Only farmd is killed (``kill -9`` of its pid, not of its group), as a crash or
the OOM killer would: what it started must end by itself. The second farmd,
started at once on the same data folder and tracker port, must get a tracker
that serves (no orphan holds the port), relaunch no app beyond provisioning,
reclaim the dead farmd's attempt without waiting out its one-hour lease, and
finish the job without charging it a try for farmd's death. Takes a few
minutes on 2 cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest

from farm.clock import wait_until
from farm.jobs.tuning_db import RECORDS_FILE
from farm.netaddr import free_port
from farm.procs import process_alive
from farm.provision.standin import demo_apk
from farm.queue.models import AttemptState, DeviceState, JobState
from farm.queue.store import Store
from farm.runner.pidfile import PIDFILE_NAME
from farm.tuning import tune_work_dir
from farm.tvm.tracker import ping
from farm.virtual.android.spec import profiles
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

# Two farmd starts, provisioning twice and two tuning batches: longer than the
# default 600 s per test on a loaded 2-core host.
pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.timeout(1200)]

PHONES = 2
READY_DEADLINE_S = 150.0
TUNE_DEADLINE_S = 480.0
RESUME_DEADLINE_S = 60.0  # the "resumes within a minute"
GONE_DEADLINE_S = 30.0
TUNE_SPEC = {"kind": "tune", "attempts": 3,
             "params": {"gemm": {"n": 64, "number": 2, "repeat": 3}, "trials": 4,
                        "trials_per_batch": 2, "phones": PHONES}}


def write_config(path: Path, *, data_dir: Path, adb_port: int, tracker_port: int,
                 apk: Path) -> Path:
    """farmd's TOML: its own tracker on a fixed port, lan phones, tuning's default 1 h lease.

    Virtual lan phones reach the host at 10.0.2.2, the Android emulator's alias
    for the host's loopback (farm.virtual.net).
    """
    path.write_text(
        f'data_dir = "{data_dir}"\nlog_level = "info"\n\n'
        f"[adb]\nport = {adb_port}\n\n"
        f'[apk]\npath = "{apk}"\n\n'
        f'[tracker]\nport = {tracker_port}\nnetwork = "lan"\nphone_host = "10.0.2.2"\n\n'
        "[metrics]\nenabled = false\n\n"
        "[api]\nenabled = false\n\n"
        "[health]\ninterval_s = 5\n",
        encoding="utf-8",
    )
    return path


def events(log_path: Path) -> list[str]:
    """The event names farmd logged, in order (lines that are not JSON are skipped)."""
    names = []
    for line in log_path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError, AttributeError):
            names.append(json.loads(line).get("event", ""))
    return names


def tracker_pid(data_dir: Path) -> int:
    """The tracker farmd recorded in its farmd.json."""
    record = json.loads((data_dir / PIDFILE_NAME).read_text(encoding="utf-8"))
    return int(record["children"]["tracker"]["pid"])


class TestFarmdKilledMidTuning:
    def test_restart_at_once_resumes_the_job_with_all_its_tries(
        self, adb_server: AdbServerHandle,
        farmd_process: Callable[[Path, Path], subprocess.Popen[bytes]],
        tmp_path: Path,
    ) -> None:
        """After kill -9 of farmd alone, a new farmd's tracker serves, it relaunches no app beyond
        provisioning, and the job resumes within a minute, keeps its tries and succeeds."""
        with contextlib.ExitStack() as stack:
            specs = [profiles(1, "lan")[0]] * PHONES
            fleet = stack.enter_context(Fleet(PHONES, specs=specs, adb_port=adb_server.port,
                                              data_dir=tmp_path / "phones"))
            data_dir = tmp_path / "farm"
            tracker_port = free_port()
            config = write_config(tmp_path / "farm.toml", data_dir=data_dir,
                                  adb_port=adb_server.port, tracker_port=tracker_port,
                                  apk=demo_apk(tmp_path / "apk"))
            first = farmd_process(config, tmp_path / "farmd-1.log")
            wait_until((data_dir / "farm.db").is_file, 60, "farmd created its database")
            store = Store(f"sqlite:///{data_dir / 'farm.db'}")
            stack.callback(store.close)

            def all_ready() -> bool:
                return all((d := store.get_device(s)) is not None and d.state is DeviceState.READY
                           for s in fleet.serials)

            wait_until(all_ready, READY_DEADLINE_S, "phones ready under the first farmd")
            job_id = store.enqueue(TUNE_SPEC, datetime.now(UTC))
            records = tune_work_dir(data_dir, job_id) / RECORDS_FILE
            wait_until(lambda: records.is_file() and b"\n" in records.read_bytes(),
                       TUNE_DEADLINE_S, "first tuning records written")
            [interrupted] = store.attempts(job_id)
            assert interrupted.state is AttemptState.RUNNING
            old_tracker = tracker_pid(data_dir)
            descendants = psutil.Process(first.pid).children(recursive=True)
            assert old_tracker in {p.pid for p in descendants}

            os.kill(first.pid, signal.SIGKILL)  # farmd alone, not its group
            first.wait(timeout=30)
            wait_until(lambda: not any(process_alive(p) for p in descendants), GONE_DEADLINE_S,
                       "everything the killed farmd started ended by itself")

            second_log = tmp_path / "farmd-2.log"
            restarted_s = time.monotonic()
            farmd_process(config, second_log)

            def resumed() -> bool:
                return any(a.id != interrupted.id and a.state is not AttemptState.ABANDONED
                           for a in store.attempts(job_id))

            wait_until(resumed, RESUME_DEADLINE_S, "the job resumed under the second farmd")
            resumed_after_s = time.monotonic() - restarted_s
            assert ping("127.0.0.1", tracker_port)
            assert tracker_pid(data_dir) != old_tracker
            wait_until(lambda: store.get_job(job_id).state.ended,  # type: ignore[union-attr]
                       TUNE_DEADLINE_S, "job finished under the second farmd")

            job = store.get_job(job_id)
            assert job is not None and job.state is JobState.SUCCEEDED, job
            attempts = store.attempts(job_id)
            reclaimed = attempts[0]
            assert reclaimed.id == interrupted.id
            assert reclaimed.state is AttemptState.ABANDONED
            assert "farmd restarted" in (reclaimed.error or "")
            # farmd's death cost no try: only the attempts after it count.
            assert job.attempts_made == len(attempts) - 1
            logged = events(second_log)
            assert logged.count("attempts_reclaimed") == 1
            assert "tracker_down" not in logged
            assert "tracker_restart_failed" not in logged
            # farmd launches each app three times: provisioning, the job's key, its own
            # key again for the timing (farm.fleet.serving); a relaunch storm is many.
            assert logged.count("app_relaunch") == 0
            assert logged.count("app_launching") <= 3 * PHONES
            print(f"resumed {resumed_after_s:.1f} s after the restart; "  # noqa: T201 - for -s
                  f"app launches: {logged.count('app_launching')}")
