"""The zygote (farm.runner.zygote) and farmd's handle on it (farm.runner.warm), with real processes.

No phones and no database: a child is given settings it cannot read (it
exits 2 at once, as ``python -m farm.runner.child`` does) or a FIFO nobody
writes (it blocks reading its settings until killed), so each test controls
how its children end. Each zygote imports TVM, so these take seconds.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from farm.clock import FakeClock, wait_until
from farm.procs import process_alive, signal_group
from farm.runner.warm import WarmChild, Zygote, ZygoteKeeper

READY_DEADLINE_S = 120.0  # a TVM import on a loaded 2-core host
EXIT_DEADLINE_S = 30.0


def start_ready(log_path: Path) -> Zygote:
    """A zygote that has finished its imports."""
    zygote = Zygote.start(log_path)
    wait_until(zygote.ready, READY_DEADLINE_S, "the zygote imported TVM")
    return zygote


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    """A ready zygote shared by the tests that only fork from it, closed after the module.

    Each start imports TVM (7-15 s on the loaded 2-core host); these tests
    crash or kill only their own children, which the zygote outlives by design
    (the tests that kill or close a zygote start their own).
    """
    started = start_ready(tmp_path_factory.mktemp("zygote") / "zygote.log")
    yield started
    started.close()


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """Settings a child blocks on: a FIFO that no one writes."""
    path = tmp_path / "settings.fifo"
    os.mkfifo(path)
    return path


def blocked_child(zygote: Zygote, fifo: Path, run_dir: Path) -> WarmChild:
    """A child that waits forever reading its settings."""
    return zygote.fork(["--settings", str(fifo), "--job", "1", "--attempt", "1"], run_dir,
                       run_dir / "child.log")


class TestZygote:
    def test_forked_child_runs_the_attempt_entry_point_in_its_run_folder(
        self, zygote: Zygote, tmp_path: Path
    ) -> None:
        """A forked child runs farm.runner.child's main with the given arguments and its output
        goes to its own log."""
        missing = tmp_path / "missing.json"
        child = zygote.fork(["--settings", str(missing), "--job", "1", "--attempt", "1"],
                            tmp_path, tmp_path / "child.log")
        assert child.wait(EXIT_DEADLINE_S) == 2
        assert f"Error: [Errno 2] No such file or directory: '{missing}'" in (
            tmp_path / "child.log").read_text()

    def test_forked_child_leads_its_own_session_and_crashes_alone(
        self, zygote: Zygote, fifo: Path, tmp_path: Path
    ) -> None:
        """A child leads its own session; its SIGSEGV reads as -SIGSEGV and the zygote forks on."""
        child = blocked_child(zygote, fifo, tmp_path)
        assert child.poll() is None
        assert os.getsid(child.pid) == child.pid and os.getpgid(child.pid) == child.pid
        assert psutil.Process(child.pid).ppid() == zygote.pid
        os.kill(child.pid, signal.SIGSEGV)
        assert child.wait(EXIT_DEADLINE_S) == -signal.SIGSEGV
        assert zygote.ready()
        again = blocked_child(zygote, fifo, tmp_path)
        signal_group(again.pid)  # what the dispatcher's timeout does
        assert again.wait(EXIT_DEADLINE_S) == -signal.SIGKILL

    def test_wait_times_out_like_popen(self, zygote: Zygote, fifo: Path, tmp_path: Path) -> None:
        """wait(timeout) on a running child raises subprocess.TimeoutExpired, as Popen.wait does."""
        import subprocess

        child = blocked_child(zygote, fifo, tmp_path)
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.2)
        signal_group(child.pid)
        assert child.wait(EXIT_DEADLINE_S) == -signal.SIGKILL

    def test_children_of_a_zygote_killed_with_9_end_by_themselves(
        self, fifo: Path, tmp_path: Path
    ) -> None:
        """kill -9 of the zygote: its child ends itself, and reads as killed."""
        zygote = start_ready(tmp_path / "zygote.log")
        try:
            child = blocked_child(zygote, fifo, tmp_path)
            process = psutil.Process(child.pid)
            os.kill(zygote.pid, signal.SIGKILL)
            wait_until(lambda: not process_alive(process), EXIT_DEADLINE_S,
                       "the orphaned child ended")
            assert child.wait(EXIT_DEADLINE_S) == -signal.SIGKILL
            assert not zygote.alive()
        finally:
            zygote.close()

    def test_close_ends_the_zygote_and_its_children(self, fifo: Path, tmp_path: Path) -> None:
        """close() ends the zygote and the process groups of the children it still runs."""
        zygote = start_ready(tmp_path / "zygote.log")
        child = blocked_child(zygote, fifo, tmp_path)
        processes = [psutil.Process(zygote.pid), psutil.Process(child.pid)]
        zygote.close()
        wait_until(lambda: not any(process_alive(p) for p in processes), EXIT_DEADLINE_S,
                   "zygote and child ended")


class TestZygoteKeeper:
    def test_a_dead_zygote_is_replaced_after_the_backoff(self, tmp_path: Path) -> None:
        """After the zygote dies none is offered until the backoff passed; then a new one starts."""
        clock = FakeClock()
        started: list[int] = []
        keeper = ZygoteKeeper(tmp_path / "zygote.log", clock, backoff_base_s=2.0,
                              backoff_max_s=300.0, on_start=started.append)
        try:
            first = wait_until(keeper.ready_zygote, READY_DEADLINE_S, "first zygote ready")
            assert first is not None and started == [first.pid]
            os.kill(first.pid, signal.SIGKILL)
            first.process.wait(EXIT_DEADLINE_S)
            assert keeper.ready_zygote() is None and keeper.failures == 1
            assert keeper.ready_zygote() is None and len(started) == 1  # still backing off
            clock.advance(2.0)
            assert keeper.ready_zygote() is None and len(started) == 2
            second = wait_until(keeper.ready_zygote, READY_DEADLINE_S, "second zygote ready")
            assert second is not None and second.pid == started[1] and keeper.failures == 0
        finally:
            keeper.close()
