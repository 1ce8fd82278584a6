"""The tracker ends with the process that started it, even one killed with SIGKILL (issue 10)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from farm.clock import wait_until
from farm.errors import TrackerUnreachable
from farm.netaddr import free_port
from farm.procs import group_alive, signal_group
from farm.tvm.tracker import TrackerProcess, ping

# A stand-in farmd: starts the tracker from a thread that then ends (as an
# APScheduler worker might), says so, and waits to be killed.
PARENT = """
import sys, threading, time
from farm.tvm.tracker import TrackerProcess
started = []
port = int(sys.argv[1])
thread = threading.Thread(target=lambda: started.append(TrackerProcess.start(port=port)))
thread.start()
thread.join()
print(started[0].pid, flush=True)
time.sleep(600)
"""


@pytest.fixture
def parent() -> Iterator[tuple[subprocess.Popen[bytes], int, int]]:
    """(stand-in farmd, its tracker's port, its tracker's pid); both groups killed after."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", PARENT, str(port)], stdout=subprocess.PIPE,
                               start_new_session=True)
    assert process.stdout is not None
    tracker_pid = int(process.stdout.readline())
    yield process, port, tracker_pid
    signal_group(tracker_pid)
    signal_group(process.pid)
    process.wait(timeout=30)


def test_tracker_outlives_the_thread_that_started_it(
    parent: tuple[subprocess.Popen[bytes], int, int],
) -> None:
    """PR_SET_PDEATHSIG follows the forking thread; farm forks from a thread that lives on."""
    _, port, tracker_pid = parent
    assert ping("127.0.0.1", port)
    assert group_alive(tracker_pid)


def test_tracker_group_ends_when_farmd_is_killed(
    parent: tuple[subprocess.Popen[bytes], int, int],
) -> None:
    """After SIGKILL of its parent alone, the tracker and its worker end and free the port."""
    process, port, tracker_pid = parent
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert wait_until(lambda: not group_alive(tracker_pid), 30), "orphaned tracker group"
    assert not ping("127.0.0.1", port)
    with TrackerProcess.start(port=port) as tracker:  # the next farmd's tracker binds
        assert ping(tracker.host, tracker.port)


def test_a_taken_port_is_refused_before_starting(
    parent: tuple[subprocess.Popen[bytes], int, int],
) -> None:
    """A port another tracker serves is refused at once, not mistaken for our tracker's."""
    _, port, _ = parent
    with pytest.raises(TrackerUnreachable, match="taken by another tracker"):
        TrackerProcess.start(port=port)
