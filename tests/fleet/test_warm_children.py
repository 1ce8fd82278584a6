"""Attempt children forked warm by the zygote, on virtual phones with real TVM RPC servers.

The farm (ready phones, their RPC servers, a tracker) and the dispatcher loop
process come from ``test_queue_dispatch``; here every dispatcher waits for its
zygote before the job is queued, so each attempt's child is forked warm, and
the tests check what the cold child guarantees: the job's result, a crash
reported as one, the timeout killing the group, and nothing left after a
``kill -9`` of the process that runs the dispatcher.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from test_queue_dispatch import TINY_GEMM, Farm, ended, loops, make_farm, start_loop

from farm.clock import SystemClock, wait_until
from farm.procs import group_alive, process_alive
from farm.queue import AttemptState, JobState
from farm.runner import Dispatcher
from farm.runner.warm import WarmChild

pytestmark = pytest.mark.fleet

__all__ = ["loops", "make_farm"]  # fixtures, used by name

MakeFarm = Callable[..., Farm]
ZYGOTE_DEADLINE_S = 120.0  # a TVM import on a loaded 2-core host
GONE_DEADLINE_S = 30.0


def warm_dispatcher(farm: Farm) -> Dispatcher:
    """A dispatcher whose zygote has imported TVM, so its next child is forked warm."""
    dispatcher = farm.dispatcher()

    def ready() -> bool:
        return bool(dispatcher.zygotes and dispatcher.zygotes.ready_zygote())

    farm.run_until(dispatcher, ready, "the zygote is ready", ZYGOTE_DEADLINE_S)
    return dispatcher


class TestWarmChildren:
    def test_warm_gemm_runs_to_one_result_with_every_sample(self, make_farm: MakeFarm) -> None:
        """A gemm whose child is forked by the zygote stores one result with every sample."""
        farm = make_farm(1)
        dispatcher = warm_dispatcher(farm)
        job_id = farm.store.enqueue(TINY_GEMM, SystemClock().now())
        children: list[object] = []

        def done() -> bool:
            children.extend(c.process for c in dispatcher.children.values())
            return ended(farm.store, job_id) and not dispatcher.children

        farm.run_until(dispatcher, done, "job ends")
        assert children and all(isinstance(p, WarmChild) for p in children)
        assert farm.store.get_job(job_id).state is JobState.SUCCEEDED  # type: ignore[union-attr]
        [result] = farm.store.results(job_id)
        # Every sample of every run (two when the phone was noisy, [results] rerun_noisy).
        assert len(result.samples) == sum(r["samples"] for r in result.summary["runs"]) >= 3
        assert all(s > 0 for s in result.samples)
        [attempt] = farm.store.attempts(job_id)
        assert "attempt_finished" in (dispatcher.runs_dir / f"attempt-{attempt.id}" /
                                      "child.log").read_text()
        dispatcher.close()

    def test_warm_child_killed_by_sigsegv_is_a_crash_retried_elsewhere(
        self, make_farm: MakeFarm
    ) -> None:
        """A forked child killed by SIGSEGV is reported as ChildCrashed; the job reruns on the
        other phone and succeeds."""
        farm = make_farm(2)
        dispatcher = warm_dispatcher(farm)
        job_id = farm.store.enqueue(TINY_GEMM, SystemClock().now())
        farm.run_until(dispatcher, lambda: bool(dispatcher.children), "child started")
        [first] = dispatcher.children.values()
        assert isinstance(first.process, WarmChild)
        os.kill(first.process.pid, signal.SIGSEGV)
        farm.run_until(
            dispatcher, lambda: ended(farm.store, job_id) and not dispatcher.children, "job ends"
        )
        attempts = farm.store.attempts(job_id)
        assert attempts[0].state is AttemptState.FAILED and attempts[0].error_kind == "ChildCrashed"
        assert "signal SIGSEGV" in (attempts[0].error or "")
        assert attempts[-1].state is AttemptState.SUCCEEDED
        assert attempts[-1].serials != attempts[0].serials
        assert dispatcher.zygotes is not None and dispatcher.zygotes.ready_zygote() is not None
        dispatcher.close()

    def test_warm_child_past_its_timeout_is_killed_with_its_group(
        self, make_farm: MakeFarm
    ) -> None:
        """A forked child past timeout_s is killed with its whole process group (JobTimeout)."""
        farm = make_farm(1)
        dispatcher = warm_dispatcher(farm)
        # Not the tiny GEMM: a warm child compiles and times that within 0.5 s once
        # its timing has no time floor, and then the job succeeds before its timeout.
        slow = {"kind": "gemm", "params": {"n": 256, "number": 100, "repeat": 50}}
        job_id = farm.store.enqueue({**slow, "timeout_s": 0.5}, SystemClock().now())
        farm.run_until(dispatcher, lambda: bool(dispatcher.children), "child started")
        [child] = dispatcher.children.values()
        assert isinstance(child.process, WarmChild)
        farm.run_until(dispatcher, lambda: not dispatcher.children, "child killed", 30)
        assert child.process.returncode == -signal.SIGKILL
        assert not group_alive(child.process.pid)
        [attempt] = farm.store.attempts(job_id)
        assert attempt.error_kind == "JobTimeout"
        dispatcher.close()

    def test_an_attempt_holding_a_gpu_host_starts_cold(self, make_farm: MakeFarm) -> None:
        """With the zygote ready, a claim on a device of kind gpu gets a new Python: CUDA fails
        in a fork of a process that loaded TVM (the dispatcher's COLD_KINDS)."""
        farm = make_farm(1)
        dispatcher = warm_dispatcher(farm)
        [serial] = farm.serials
        farm.store.upsert_device(serial, SystemClock().now(), kind="gpu")
        job_id = farm.store.enqueue(TINY_GEMM, SystemClock().now())
        farm.run_until(dispatcher, lambda: bool(dispatcher.children), "child started")
        [child] = dispatcher.children.values()
        assert isinstance(child.process, subprocess.Popen)
        farm.run_until(dispatcher, lambda: ended(farm.store, job_id) and not dispatcher.children,
                       "job ends")
        dispatcher.close()

    def test_switched_off_children_start_cold(self, make_farm: MakeFarm) -> None:
        """With [jobs] warm_children = false no zygote starts and the child is a new Python."""
        farm = make_farm(1, warm_children=False)
        dispatcher = farm.dispatcher()
        farm.store.enqueue(TINY_GEMM, SystemClock().now())
        farm.run_until(dispatcher, lambda: bool(dispatcher.children), "child started")
        [child] = dispatcher.children.values()
        assert isinstance(child.process, subprocess.Popen)
        assert dispatcher.zygotes is None
        dispatcher.close()


class TestKill9:
    def test_kill_9_of_the_dispatcher_leaves_no_zygote_or_child(
        self, make_farm: MakeFarm, loops: list[subprocess.Popen[bytes]], tmp_path: Path
    ) -> None:
        """kill -9 of the process running the dispatcher (farmd's stand-in) alone: its zygote and
        the warm child it forked end by themselves."""
        farm = make_farm(1)
        farm.fleet.heat(farm.serials[0], 45.0)  # the child waits at the thermal gate
        settings_path = tmp_path / "settings.json"
        settings_path.write_text(farm.settings.model_dump_json())
        loop_log = tmp_path / "loop.log"
        loop = start_loop(settings_path, loop_log, loops)
        wait_until(lambda: "zygote_ready" in loop_log.read_text(), ZYGOTE_DEADLINE_S,
                   "the loop's zygote is ready")
        [zygote] = [p for p in psutil.Process(loop.pid).children()
                    if "farm.runner.zygote" in p.cmdline()]
        farm.store.enqueue(TINY_GEMM, SystemClock().now())
        [child] = wait_until(zygote.children, 60, "the zygote forked the attempt's child") or []
        descendants = psutil.Process(loop.pid).children(recursive=True)
        assert {zygote.pid, child.pid} <= {p.pid for p in descendants}
        assert os.getpgid(child.pid) == child.pid

        os.kill(loop.pid, signal.SIGKILL)  # the loop alone, not its group
        loop.wait(timeout=30)
        wait_until(lambda: not any(process_alive(p) for p in descendants), GONE_DEADLINE_S,
                   "zygote and child ended by themselves")
