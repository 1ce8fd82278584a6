"""Two farmd hosts on one PostgreSQL queue (issue 14's "Must show", the multi-host core).

Each farmd is a real process with its own data folder, adb server, tracker,
metrics port and two virtual phones (``--virtual-phones 2``, which die with
it, as a host's USB phones go with the host). Jobs are everyone's, phones their
host's: unpinned GEMM jobs run on both hosts' phones, a job pinned to a phone
runs on the host that owns it, and after ``kill -9`` of one host (its farmd and
everything it started, frozen first so that a job is surely mid-run) its
attempts' short leases run out, the other host's reap requeues them, and every
job still ends with exactly one result, while the dead host's phones show as
``unreachable`` in ``farmctl devices --json``.

Needs ``TEST_POSTGRES_URL`` (a server where the user may CREATE DATABASE);
each test makes a fresh database and drops it. Takes a few minutes on 2 cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from farm.cli.main import cli
from farm.clock import wait_until
from farm.netaddr import free_port
from farm.procs import spawn, tied_to_parent
from farm.queue.models import AttemptState, DeviceState, JobState
from farm.queue.store import Store
from farm.testing import fresh_postgres_database, log_events
from farm.virtual.testing import adb_server

pytestmark = [pytest.mark.fleet, pytest.mark.slow, pytest.mark.timeout(1200)]

HOSTS = ("host-a", "host-b")
PHONES = 2  # per host
READY_DEADLINE_S = 240.0
JOBS_DEADLINE_S = 480.0
LEASE_S = 20.0  # the dead host's attempts are requeued this long after its death
DEAD_AFTER_S = 6.0
GEMM = {"kind": "gemm", "params": {"n": 64, "number": 2, "repeat": 3}}
#: The GEMMs' timing: their warm-up and sample counts, not a user's 1 s bounds on each
#: (tests/fleet/conftest.py's PLUMBING_RESULTS): where a job runs is what is checked, and
#: each of its 12 jobs paid at least 2 s of them.
PLUMBING_RESULTS = "[results]\nwarmup_min_s = 0\nmin_measure_s = 0\n"


@pytest.fixture
def pg_url(postgres_base_url: str) -> Iterator[str]:
    """A fresh PostgreSQL database of its own, dropped after the test."""
    with fresh_postgres_database(postgres_base_url, "farm_multihost_") as url:
        yield url


def write_config(path: Path, *, host_id: str, data_dir: Path, database_url: str,
                 adb_port: int, results: str = "") -> Path:
    """One host's farmd TOML: own folder, ports and host id; short leases and host deadline.

    ``results`` is appended as written: a ``[results]`` section, or "" for a user's.
    """
    path.write_text(
        f'host_id = "{host_id}"\ndata_dir = "{data_dir}"\n'
        f'database_url = "{database_url}"\nlog_level = "info"\n\n'
        f"[adb]\nport = {adb_port}\n\n"
        f"[tracker]\nport = {free_port()}\n\n"
        f"[metrics]\nport = {free_port()}\n\n"
        f"[api]\nport = {free_port()}\n\n"
        f"[health]\ninterval_s = 5\n\n"
        f"[jobs]\nlease_s = {LEASE_S}\n\n"
        f"[hosts]\nheartbeat_s = 1\ndead_after_s = {DEAD_AFTER_S}\n\n"
        f"{results}",
        encoding="utf-8",
    )
    return path


def start_farmd(
    config: Path, log_path: Path, stack: contextlib.ExitStack
) -> subprocess.Popen[bytes]:
    """``farmd --config CONFIG --virtual-phones 2``, own session; its group is killed after.

    Tied to this process (:func:`farm.procs.tied_to_parent`), as the
    ``farmd_process`` fixture's: a killed test worker takes it along.
    """
    with log_path.open("ab") as log:
        process = spawn(
            tied_to_parent([sys.executable, "-c", "from farm.daemon import main; main()",
                            "--config", str(config), "--virtual-phones", str(PHONES),
                            "--json-logs"]),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def end() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    stack.callback(end)
    return process


def freeze(pid: int) -> list[psutil.Process]:
    """SIGSTOP the process and every descendant (it first, so it starts no new one); them all.

    A job seen running on a host killed just after could end in between (a GEMM
    takes about a second), and a child whose farmd died still runs up to the
    0.5 s it takes to notice (:mod:`farm.runner.child`): frozen, the host's
    attempts stay as the store shows them until the kill.
    """
    root = psutil.Process(pid)
    root.suspend()
    frozen = {pid: root}
    while fresh := [p for p in root.children(recursive=True) if p.pid not in frozen]:
        for process in fresh:
            with contextlib.suppress(psutil.Error):
                process.suspend()
            frozen[process.pid] = process
    return list(frozen.values())


def wait_started(farmds: dict[str, subprocess.Popen[bytes]], logs: dict[str, Path],
                 deadline_s: float) -> None:
    """Wait until every farmd logged ``farmd_started``; fail at once if one exited first.

    A farmd that still runs is still starting (a tracker, an import of TVM and
    two phones each, two at once on a loaded 2-core host: a fixed 240 s ran out);
    a farmd that exited will never start, and its log says why.

    Raises:
        AssertionError: a farmd exited before it started (with its log's last lines).
        TimeoutError: still not both started after ``deadline_s``.
    """
    def started(host: str) -> bool:
        if log_events(logs[host], "farmd_started"):
            return True
        code = farmds[host].poll()
        if code is not None:
            tail = logs[host].read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
            raise AssertionError(f"{host}'s farmd exited with {code} before it started:\n"
                                 + "\n".join(tail))
        return False

    # The form without ``what``: an exited farmd's AssertionError ends the wait at once.
    if not wait_until(lambda: all(started(h) for h in farmds), deadline_s):
        raise TimeoutError(f"both farmd started: not within {deadline_s} s")


def serials_ready(store: Store, host: str) -> list[str]:
    """The host's phones that are ready, by serial."""
    return [d.serial for d in store.list_devices()
            if d.host == host and d.state is DeviceState.READY]


def farmctl_devices(config: Path) -> dict[str, dict[str, object]]:
    """``farmctl devices --json`` with ``config``, by serial."""
    result = CliRunner().invoke(cli, ["--config", str(config), "devices", "--json", "--all"],
                                env={"FARM_CONFIG": None})
    assert result.exit_code == 0, result.output
    return {row["serial"]: row for row in json.loads(result.stdout)}


class TestTwoHostsOneQueue:
    def test_jobs_spread_pinned_run_on_owner_and_a_dead_host_loses_no_job(
        self, pg_url: str, tmp_path: Path
    ) -> None:
        """Both farmd start at once on an empty database and it is migrated once; jobs run on
        both hosts' phones, a pinned job on its phone's host; after kill -9 of one farmd mid-job
        every job ends with exactly one result and its phones are unreachable."""
        with contextlib.ExitStack() as stack:
            configs, farmds = {}, {}
            for host in HOSTS:
                server = stack.enter_context(adb_server())
                configs[host] = write_config(
                    tmp_path / f"{host}.toml", host_id=host, data_dir=tmp_path / host,
                    database_url=pg_url, adb_port=server.port, results=PLUMBING_RESULTS)
            # Both start at once on the empty database: exactly one of them migrates it.
            logs = {host: tmp_path / f"{host}.log" for host in HOSTS}
            for host in HOSTS:
                farmds[host] = start_farmd(configs[host], logs[host], stack)
            wait_started(farmds, logs, JOBS_DEADLINE_S)
            migrated = [e for h in HOSTS for e in log_events(logs[h], "schema_migrated")]
            assert [e["from_revision"] for e in migrated] == ["none"], migrated
            store = stack.enter_context(Store(pg_url, auto_migrate=False))  # at head: checks only
            wait_until(lambda: all(len(serials_ready(store, h)) == PHONES for h in HOSTS),
                       READY_DEADLINE_S, "every host's phones ready")
            assert {h.host_id for h in store.list_hosts()} == set(HOSTS)
            phones = {h: serials_ready(store, h) for h in HOSTS}

            now = datetime.now(UTC)
            spread = [store.enqueue(GEMM, now) for _ in range(3 * PHONES)]
            pinned = {h: store.enqueue({**GEMM, "devices": {"serials": [phones[h][0]]}}, now)
                      for h in HOSTS}
            first = [*spread, *pinned.values()]
            wait_until(lambda: all(store.get_job(j).state.ended for j in first),  # type: ignore[union-attr]
                       JOBS_DEADLINE_S, "the first jobs ended")
            ran_on = {a.host for j in spread for a in store.attempts(j)}
            assert ran_on == set(HOSTS), ran_on
            for host, job_id in pinned.items():
                [attempt] = store.attempts(job_id)
                assert (attempt.host, attempt.serials) == (host, (phones[host][0],))

            # kill -9 host-b (its farmd, phones and children) while it runs a job.
            now = datetime.now(UTC)
            second = [store.enqueue(GEMM, now) for _ in range(2 * PHONES)]

            def b_running() -> bool:
                return any(a.host == "host-b" and a.state is AttemptState.RUNNING
                           for j in second for a in store.attempts(j))

            while True:  # freeze host-b whole, then kill it only if a job is mid-run
                wait_until(b_running, JOBS_DEADLINE_S, "host-b runs a job")
                frozen = freeze(farmds["host-b"].pid)
                if b_running():
                    break
                for process in frozen:  # its job ended in between: go on and wait again
                    with contextlib.suppress(psutil.Error):
                        process.resume()
            for process in frozen:  # the host dies: nothing of it runs on to end the job
                with contextlib.suppress(psutil.Error):
                    process.send_signal(signal.SIGKILL)
            farmds["host-b"].wait(timeout=30)

            wait_until(lambda: all(store.get_job(j).state.ended for j in second),  # type: ignore[union-attr]
                       JOBS_DEADLINE_S, "every job ended after host-b died")
            for job_id in [*first, *second]:
                job = store.get_job(job_id)
                assert job is not None and job.state is JobState.SUCCEEDED, job
                assert store.count_results(job_id) == 1, job_id
            abandoned = [a for j in second for a in store.attempts(j)
                         if a.state is AttemptState.ABANDONED]
            assert abandoned and {a.host for a in abandoned} == {"host-b"}

            shown = farmctl_devices(configs["host-a"])
            for serial in phones["host-b"]:
                assert shown[serial]["unreachable"] is True, shown[serial]
                assert str(shown[serial]["shown_state"]).startswith("unreachable")
            for serial in phones["host-a"]:
                assert shown[serial]["unreachable"] is False, shown[serial]
                assert shown[serial]["host"] == "host-a"
