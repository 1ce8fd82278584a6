"""Child processes in their own process group that end with farmd, even on ``kill -9``.

Every long-lived child farm starts (tracker, RPC servers, probes, attempts)
runs with ``start_new_session=True``, because TVM's servers leave
``popen_worker`` children that only a group signal reaches.

A child that must not outlive its parent calls :func:`end_group_with_parent`
first thing. It asks Linux for a signal when the parent dies
(``PR_SET_PDEATHSIG``, prctl(2)) and answers that signal by killing its whole
process group, so the TVM workers it forked go too. The kernel sends the signal
when the *thread* that forked the child exits, not the process: farmd starts
such children through :func:`spawn`, whose one thread lives as long as farmd.
``PR_SET_PDEATHSIG`` is set in the child itself rather than in a
``preexec_fn`` (which the subprocess documentation calls unsafe in a threaded
program, and farmd is one); the window before it is set is closed by checking
the parent pid right after.

A program that cannot call it (the native ``adb nodaemon server``, a farmd a
test starts) runs through :func:`tied_to_parent`: a Python shim sets the signal
and then becomes the program (``os.execvp``), which keeps it (prctl(2): the
setting survives ``execve`` of a binary that is not set-user-ID).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import ctypes.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

__all__ = ["end_group_with_parent", "group_alive", "read_pid_record", "set_parent_death_signal",
           "signal_group", "spawn", "tied_to_parent"]

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# One long-lived thread forks every child tied to farmd (see the module doc).
_spawner = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="farm-spawn")


def signal_group(pgid: int, signum: int = signal.SIGKILL) -> None:
    """Send ``signum`` to process group ``pgid``; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def group_alive(pgid: int) -> bool:
    """Whether a live (non-zombie) process of group ``pgid`` remains.

    Zombies are skipped: they hold no sockets, and the reaper (our own
    ``wait`` or the container's PID 1) may take a while.
    """
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def set_parent_death_signal(signum: int) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent thread exits.

    Returns:
        False where prctl(2) is missing (not Linux); nothing is set then.
    """
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    try:
        prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    return bool(prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)


def _kill_own_group(_signum: int, _frame: FrameType | None) -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def end_group_with_parent(parent_pid: int) -> None:
    """End this process's group (SIGKILL) when ``parent_pid`` dies or on SIGTERM.

    Call it first thing in a child that leads its own process group. If the
    parent is already gone (it died before this call), the group ends now.
    """
    signal.signal(signal.SIGTERM, _kill_own_group)
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:
        _kill_own_group(signal.SIGTERM, None)


#: The shim :func:`tied_to_parent` runs: ``python -c SHIM PARENT_PID SIGNUM PROGRAM ARGS...``.
_TIED_SHIM = "import sys; from farm.procs import _exec_tied; _exec_tied(sys.argv[1:])"


def tied_to_parent(argv: Sequence[str], signum: int = signal.SIGKILL) -> list[str]:
    """``argv`` behind a shim that asks for ``signum`` when this process dies, then execs it.

    Start the result with :func:`spawn`: the signal follows the forking thread,
    and spawn's thread lives as long as this process. The pid the caller gets
    is the program's own (the shim execs, it does not fork).

    Args:
        argv: the program and its arguments (looked up on ``PATH`` as ``execvp`` does).
        signum: the signal the program gets when this process dies.

    Returns:
        The argv to start instead.
    """
    return [sys.executable, "-c", _TIED_SHIM, str(os.getpid()), str(int(signum)), *argv]


def _exec_tied(args: Sequence[str]) -> None:
    """The shim's body: ``PARENT_PID SIGNUM PROGRAM ARGS...`` (see :func:`tied_to_parent`)."""
    parent_pid, signum, *argv = args
    set_parent_death_signal(int(signum))
    if os.getppid() != int(parent_pid):  # the parent died before the signal was set
        os._exit(1)
    os.execvp(argv[0], argv)  # noqa: S606 - an argv list, no shell, by design


def spawn(argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, start_new_session=True, **popen_kwargs)`` from farm's spawn thread.

    The thread lives as long as this process, so a child's ``PR_SET_PDEATHSIG``
    fires when the process dies, not when the calling thread (an APScheduler
    worker, say) ends.

    Raises:
        OSError: the program could not be started.
    """
    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(list(argv), start_new_session=True, **popen_kwargs)

    return _spawner.submit(start).result()


def process_alive(process: psutil.Process) -> bool:
    """Whether ``process`` still runs: a zombie or a vanished process does not."""
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def read_pid_record(path: Path) -> dict[str, Any] | None:
    """The JSON object a pid file holds (farmd's, the adb server's); None if unreadable."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
