"""A database outage is not a job failure: PostgreSQL stopped for 10 s mid-batch (issue 26).

The test runs its own throwaway PostgreSQL (``.ci/postgres``, which needs root
to run the server as ``nobody``), so stopping it touches no other test. Jobs
allow one attempt each: an attempt the outage ended that cost its job a try
would fail the job. A child that starts during the outage waits for the
server (``[database] unreachable_wait_s``) instead of ending.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from device_states import put_state

from farm.clock import SystemClock, wait_until
from farm.config import Settings
from farm.errors import StoreError
from farm.jobs.local_cluster import LocalCluster
from farm.queue import DeviceState, JobState, Store
from farm.runner import Dispatcher
from farm.tvm.keys import phone_key
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet

ROOT = Path(__file__).resolve().parents[2]
TINY_GEMM = {"kind": "gemm", "attempts": 1, "params": {"n": 16, "number": 1, "repeat": 3}}
JOBS = 2
OUTAGE_S = 10.0
DEADLINE_S = 90.0


class Postgres:
    """A throwaway PostgreSQL server of ``.ci/postgres`` that the test may stop and start."""

    def __init__(self) -> None:
        out = subprocess.run([str(ROOT / ".ci" / "postgres")], check=True, capture_output=True,
                             text=True, timeout=120).stdout.split()
        self.dir, self.url = Path(out[0]), out[1]
        self.port = self.url.rsplit(":", 1)[1].split("/")[0]

    def _pg_ctl(self, *args: str) -> None:
        pg_ctl = shutil.which("pg_ctl") or next(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
        subprocess.run(["runuser", "-u", "nobody", "--", str(pg_ctl), "-D",
                        str(self.dir / "data"), *args], check=True, capture_output=True,
                       timeout=60)

    def stop(self) -> None:
        """Stop the server (fast: open connections are ended)."""
        self._pg_ctl("-m", "fast", "stop")

    def start(self) -> None:
        """Start it again on the same port."""
        self._pg_ctl("-l", str(self.dir / "log"), "-w", "-o",
                     f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1", "start")


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    """A private PostgreSQL (skipped without root or PostgreSQL's tools)."""
    if os.geteuid() != 0 or not (shutil.which("initdb") or list(
            Path("/usr/lib/postgresql").glob("*/bin/initdb"))):
        pytest.skip("a private PostgreSQL needs root and PostgreSQL's server tools")
    server = Postgres()
    try:
        yield server
    finally:
        subprocess.run([str(ROOT / ".ci" / "postgres"), "stop", str(server.dir)], check=False,
                       timeout=60)
        shutil.rmtree(server.dir, ignore_errors=True)


def tick(dispatcher: Dispatcher) -> None:
    """One dispatcher tick; after a StoreError the next tick retries, as in farmd."""
    with contextlib.suppress(StoreError):
        dispatcher.tick()


def test_outage_mid_batch_costs_no_try(postgres: Postgres, adb_server: AdbServerHandle,
                                       make_fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two one-try jobs on two phones; the database stops for 10 s while attempts run.
    Every job succeeds on its one try, and the attempts the outage ended cost nothing."""
    fleet = make_fleet(2)
    cluster = LocalCluster()
    try:
        cluster.start_tracker()
        settings = Settings(data_dir=tmp_path / "data", database_url=postgres.url,
                            adb={"port": adb_server.port}, tracker={"port": cluster.port})
        for serial in fleet.serials:
            cluster.add_servers(phone_key(settings.tracker.key, serial))
        with Store(postgres.url) as store:
            now = SystemClock().now()
            for serial in fleet.serials:
                store.upsert_device(serial, now, {"abi": "x86_64", "sdk": 34,
                                                  "host_runtime": True})
                put_state(store, serial, DeviceState.READY, "health check passed", now)
            jobs = [store.enqueue(TINY_GEMM, now) for _ in range(JOBS)]
            dispatcher = Dispatcher(store, settings, SystemClock())
            wait_until(lambda: tick(dispatcher) or bool(dispatcher.children), DEADLINE_S,
                       "attempts running")
            postgres.stop()
            clock = SystemClock()
            back_at_s = clock.monotonic() + OUTAGE_S
            wait_until(lambda: tick(dispatcher) or clock.monotonic() >= back_at_s,
                       OUTAGE_S + 5, "the outage's end")
            postgres.start()

            def all_ended() -> bool:
                tick(dispatcher)
                views = [store.get_job(j) for j in jobs]
                return all(v is not None and v.state.ended for v in views) and not (
                    dispatcher.children)

            wait_until(all_ended, DEADLINE_S, "every job ends")
            views = [store.get_job(j) for j in jobs]
            assert [v.state for v in views if v] == [JobState.SUCCEEDED] * JOBS, [
                (v.id, v.state, v.error) for v in views if v]
            assert all(v.attempts_made == 1 for v in views if v)
            handed = [a for j in jobs for a in store.attempts(j) if a.state.value == "abandoned"]
            waited = [log for log in (tmp_path / "data" / "runs").glob("*/child.log")
                      if "attempt_store_waiting" in log.read_text(errors="replace")]
            assert handed or waited, "the outage touched no attempt: it proved nothing"
    finally:
        cluster.close()
