"""A program started through farm.procs.tied_to_parent ends when its starter is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil

from farm.clock import wait_until
from farm.procs import process_alive, signal_group

# A stand-in test worker: starts `sleep` tied to itself, says its pid, waits to be killed.
STARTER = """
import subprocess, time
from farm.procs import spawn, tied_to_parent
program = spawn(tied_to_parent(["sleep", "600"]), stdin=subprocess.DEVNULL)
print(program.pid, flush=True)
time.sleep(600)
"""


def test_the_program_ends_when_its_starter_is_killed() -> None:
    """SIGKILL of the starter alone: the program (exec'd by the shim, same pid) gets SIGKILL."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE,
                               start_new_session=True)
    assert starter.stdout is not None
    program_pid = int(starter.stdout.readline())
    try:
        program = psutil.Process(program_pid)
        assert wait_until(lambda: program.name() == "sleep", 10), "the shim did not exec"
        os.kill(starter.pid, signal.SIGKILL)
        starter.wait(timeout=30)
        gone = wait_until(lambda: not process_alive(program), 10)
        assert gone, "the program outlived its starter"
    finally:
        signal_group(program_pid)
        signal_group(starter.pid)
