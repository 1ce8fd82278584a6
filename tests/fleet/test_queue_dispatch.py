"""The dispatcher with real children: virtual phones for health, a real TVM RPC server per phone.

Each phone's RPC server is a real ``python -m tvm.exec.rpc_server`` registered
with a real local tracker under the phone's key (``farm.tvm.keys.phone_key``),
started in its own process group by ``farm.jobs.local_cluster.LocalCluster``;
thermal gating reads the virtual phones through the real adb server.

The restart test runs the dispatcher in its own process (a stand-in for
farmd's tick loop), kills its process group with SIGKILL while the job's child
runs, checks the orphaned child ended itself, starts a new dispatcher process,
plays the health sweep (a reaped phone is marked ready again), and expects the
job to finish with exactly one result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from device_states import put_state

from farm.clock import SystemClock, wait_until
from farm.config import Settings
from farm.jobs.local_cluster import LocalCluster
from farm.procs import group_alive, signal_group
from farm.queue import AttemptState, DeviceState, JobState, Store
from farm.queue.waiting import wait_reasons
from farm.runner import Dispatcher
from farm.tvm.keys import phone_key
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet

JOB_DEADLINE_S = 120.0
TINY_GEMM = {"kind": "gemm", "params": {"n": 16, "number": 1, "repeat": 3}}


@dataclass
class Farm:
    """A store with ready phones, their RPC servers, and settings pointing at both."""

    settings: Settings
    store: Store
    fleet: Fleet
    cluster: LocalCluster

    @property
    def serials(self) -> list[str]:
        """The phones' serials."""
        return self.fleet.serials

    def dispatcher(self) -> Dispatcher:
        """A dispatcher on this farm's store, with the system clock."""
        return Dispatcher(self.store, self.settings, SystemClock())

    def run_until(self, dispatcher: Dispatcher, predicate: Callable[[], bool], what: str,
                  deadline_s: float = JOB_DEADLINE_S) -> None:
        """Tick until ``predicate`` holds."""
        wait_until(lambda: dispatcher.tick() and predicate(), deadline_s, what)


def make_settings(data_dir: Path, adb_port: int, tracker_port: int, **jobs: float) -> Settings:
    """Settings for a hermetic farm: tmp data folder, private adb server, local tracker.

    Measurements keep their warm-up and sample counts but not the default time
    bounds: these tests check dispatch, not speed verdicts (as
    tests/fleet/conftest.py's ``PLUMBING_RESULTS``).
    """
    return Settings(data_dir=data_dir, adb={"port": adb_port}, tracker={"port": tracker_port},
                    jobs=jobs or {}, results={"warmup_min_s": 0.0, "min_measure_s": 0.0})


@pytest.fixture
def make_farm(
    adb_server: AdbServerHandle, make_fleet, tmp_path: Path
) -> Iterator[Callable[..., Farm]]:  # type: ignore[no-untyped-def]
    """Factory: ``make_farm(n, **job_settings)`` -> n ready phones with RPC servers."""
    clusters: list[LocalCluster] = []
    stores: list[Store] = []

    def make(n: int = 1, **jobs: float) -> Farm:
        fleet = make_fleet(n)
        cluster = LocalCluster()
        clusters.append(cluster)
        cluster.start_tracker()
        settings = make_settings(tmp_path / "data", adb_server.port, cluster.port, **jobs)
        for serial in fleet.serials:
            cluster.add_servers(phone_key(settings.tracker.key, serial))
        store = Store(settings.database_url)
        stores.append(store)
        now = SystemClock().now()
        for serial in fleet.serials:
            store.upsert_device(serial, now, {"abi": "x86_64", "sdk": 34, "host_runtime": True})
            put_state(store, serial, DeviceState.READY, "health check passed", now)
        return Farm(settings, store, fleet, cluster)

    yield make
    for store in stores:
        store.close()
    for cluster in clusters:
        cluster.close()


def ended(store: Store, job_id: int) -> bool:
    """Whether the job reached a final state."""
    view = store.get_job(job_id)
    return view is not None and view.state in (
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.CANCELLED,
    )


class TestDispatcher:
    def test_gemm_job_runs_to_one_result_with_every_sample(self, make_farm) -> None:  # type: ignore[no-untyped-def]
        """A queued gemm runs in a child and stores one result, every raw sample and the phone's
        snapshot."""
        farm = make_farm(1)
        job_id = farm.store.enqueue(TINY_GEMM, SystemClock().now())
        dispatcher = farm.dispatcher()
        farm.run_until(
            dispatcher, lambda: ended(farm.store, job_id) and not dispatcher.children, "job ends"
        )
        assert farm.store.get_job(job_id).state is JobState.SUCCEEDED  # type: ignore[union-attr]
        [result] = farm.store.results(job_id)
        # Every sample of every run (a second run when the phone was noisy, [results]
        # rerun_noisy), each run at least the spec's 3 and one snapshot.
        runs = result.summary["runs"]
        assert len(result.samples) == sum(r["samples"] for r in runs) >= 3 * len(runs)
        assert all(s > 0 for s in result.samples)
        assert result.summary["gflops"] > 0 and result.summary["n"] == 16
        assert farm.store.get_device(farm.serials[0]).state is DeviceState.READY  # type: ignore[union-attr]
        snapshot = farm.store.snapshots(job_id)[0]
        assert len(farm.store.snapshots(job_id)) == len(runs) in (1, 2)
        assert snapshot.serial == farm.serials[0] and snapshot.battery["battery_temp_c"] is not None

    def test_opencl_job_is_never_placed_on_a_phone_without_opencl(self, make_farm) -> None:  # type: ignore[no-untyped-def]
        """An OpenCL gemm waits, saying why, while a CPU gemm queued after it runs on the phone."""
        farm = make_farm(1)
        spec = {**TINY_GEMM, "params": {**TINY_GEMM["params"], "target": "opencl"}}
        opencl_id = farm.store.enqueue(spec, SystemClock().now())
        cpu_id = farm.store.enqueue(TINY_GEMM, SystemClock().now())
        dispatcher = farm.dispatcher()
        farm.run_until(
            dispatcher,
            lambda: ended(farm.store, cpu_id) and not dispatcher.children,
            "cpu job ends",
        )
        assert farm.store.get_job(cpu_id).state is JobState.SUCCEEDED  # type: ignore[union-attr]
        view = farm.store.get_job(opencl_id)
        assert view.state is JobState.QUEUED and view.attempts_made == 0  # type: ignore[union-attr]
        reasons = wait_reasons(farm.store.snapshot(), SystemClock().now())
        assert reasons[opencl_id].startswith("0 phones match target=opencl")

    def test_crashed_child_is_retried_on_another_phone(self, make_farm) -> None:  # type: ignore[no-untyped-def]
        """A child killed by SIGSEGV with no outcome is a phone fault: the job reruns elsewhere and
        succeeds."""
        farm = make_farm(2)
        job_id = farm.store.enqueue(TINY_GEMM, SystemClock().now())
        dispatcher = farm.dispatcher()
        farm.run_until(dispatcher, lambda: bool(dispatcher.children), "child started")
        [first] = dispatcher.children.values()
        os.kill(first.process.pid, signal.SIGSEGV)
        farm.run_until(
            dispatcher, lambda: ended(farm.store, job_id) and not dispatcher.children, "job ends"
        )
        attempts = farm.store.attempts(job_id)
        assert attempts[0].state is AttemptState.FAILED and attempts[0].error_kind == "ChildCrashed"
        assert "SIGSEGV" in (attempts[0].error or "")
        assert attempts[-1].state is AttemptState.SUCCEEDED
        assert attempts[-1].serials != attempts[0].serials
        assert farm.store.count_results(job_id) == 1

    def test_attempt_past_its_timeout_is_killed_and_retried_later(self, make_farm) -> None:  # type: ignore[no-untyped-def]
        """A child running past timeout_s is killed with its group and the job requeued with a
        backoff."""
        farm = make_farm(1)
        job_id = farm.store.enqueue({**TINY_GEMM, "timeout_s": 0.5}, SystemClock().now())
        dispatcher = farm.dispatcher()
        farm.run_until(dispatcher, lambda: bool(dispatcher.children), "child started")
        [child] = dispatcher.children.values()
        farm.run_until(dispatcher, lambda: not dispatcher.children, "child killed", 30)
        assert child.process.returncode == -signal.SIGKILL
        [attempt] = farm.store.attempts(job_id)
        assert attempt.error_kind == "JobTimeout"
        view = farm.store.get_job(job_id)
        assert view.state is JobState.QUEUED and view.retry_at is not None  # type: ignore[union-attr]

    def test_cancel_stops_the_running_child(self, make_farm) -> None:  # type: ignore[no-untyped-def]
        """Cancelling a running job kills its child at the next heartbeat and frees the phone."""
        farm = make_farm(1)
        job_id = farm.store.enqueue(TINY_GEMM, SystemClock().now())
        dispatcher = farm.dispatcher()
        farm.run_until(dispatcher, lambda: bool(dispatcher.children), "child started")
        farm.store.cancel(job_id, SystemClock().now())
        farm.run_until(dispatcher, lambda: not dispatcher.children, "child stopped", 30)
        assert farm.store.get_job(job_id).state is JobState.CANCELLED  # type: ignore[union-attr]
        assert farm.store.count_results(job_id) == 0
        assert farm.store.get_device(farm.serials[0]).state is DeviceState.READY  # type: ignore[union-attr]

    def test_hot_phone_is_gated_until_it_cools(self, make_farm) -> None:  # type: ignore[no-untyped-def]
        """A phone above 35 C makes the child wait; the wait is stored with the snapshot."""
        farm = make_farm(1)
        serial = farm.serials[0]
        farm.fleet.heat(serial, 45.0)
        job_id = farm.store.enqueue(TINY_GEMM, SystemClock().now())
        dispatcher = farm.dispatcher()
        farm.run_until(dispatcher, lambda: bool(dispatcher.children), "child started")
        [child] = dispatcher.children.values()
        log_path = child.run_dir / "child.log"
        farm.run_until(
            dispatcher, lambda: "thermal_gate_waiting" in log_path.read_text(), "gate waits", 60
        )
        farm.fleet.heat(serial, 25.0)
        farm.run_until(
            dispatcher, lambda: ended(farm.store, job_id) and not dispatcher.children, "job ends"
        )
        assert farm.store.get_job(job_id).state is JobState.SUCCEEDED  # type: ignore[union-attr]
        snapshot = farm.store.snapshots(job_id)[0]  # a second one if the phone was re-run
        assert snapshot.thermal_wait_s > 0 and snapshot.battery["battery_temp_c"] <= 35

LOOP = textwrap.dedent("""
    import sys, time
    from farm.clock import SystemClock
    from farm.config import Settings
    from farm.queue import Store
    from farm.runner import Dispatcher
    settings = Settings.model_validate_json(open(sys.argv[1]).read())
    dispatcher = Dispatcher(Store(settings.database_url), settings, SystemClock())
    while True:
        dispatcher.tick()
        time.sleep(0.2)
""")


@pytest.fixture
def loops(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Dispatcher processes started by a test; every group is killed afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        signal_group(process.pid)
        process.wait(timeout=30)


def start_loop(
    settings_path: Path, log_path: Path, started: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    """Start a dispatcher loop process in its own process group."""
    with log_path.open("ab") as log:
        process = subprocess.Popen([sys.executable, "-c", LOOP, str(settings_path)], stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    started.append(process)
    return process


class TestRestart:
    def test_kill_9_mid_job_then_restart_completes_with_one_result(
        self, make_farm, loops, tmp_path: Path
    ) -> None:  # type: ignore[no-untyped-def]
        """After kill -9 of the dispatcher mid-job and a restart, the job succeeds with exactly one
        result."""
        farm = make_farm(1, lease_s=3.0)
        settings_path = tmp_path / "settings.json"
        settings_path.write_text(farm.settings.model_dump_json())
        job_id = farm.store.enqueue(TINY_GEMM, SystemClock().now())
        first = start_loop(settings_path, tmp_path / "loop1.log", loops)
        children = wait_until(lambda: psutil.Process(first.pid).children(), 60, "child started")
        child_pids = [c.pid for c in children]
        [attempt] = farm.store.attempts(job_id)
        assert attempt.state is AttemptState.RUNNING

        signal_group(first.pid)
        first.wait(timeout=30)
        wait_until(
            lambda: not any(group_alive(p) for p in child_pids), 30, "orphaned child ended itself"
        )

        start_loop(settings_path, tmp_path / "loop2.log", loops)
        serial = farm.serials[0]

        def settled() -> bool:
            # Play farmd's health sweep: a phone freed by reap() is unhealthy until checked.
            device = farm.store.get_device(serial)
            if device is not None and device.state is DeviceState.UNHEALTHY:
                farm.store.move_device(serial, DeviceState.READY, "health check passed",
                                       SystemClock().now(), expect_state=device.state,
                                       expect_attempt=device.attempt_id)
            return ended(farm.store, job_id)

        wait_until(settled, 120, "job ends after restart")
        assert farm.store.get_job(job_id).state is JobState.SUCCEEDED  # type: ignore[union-attr]
        assert farm.store.count_results(job_id) == 1
        attempts = farm.store.attempts(job_id)
        assert attempts[0].state is AttemptState.ABANDONED
        assert [a.state for a in attempts].count(AttemptState.SUCCEEDED) == 1
        [result] = farm.store.results(job_id)
        assert result.attempt_id == attempts[-1].id
        assert len(result.samples) == sum(r["samples"] for r in result.summary["runs"]) >= 3
