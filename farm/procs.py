"""Child processes in their own process group: signal the group, see if it lives.

Every long-lived child farm starts (tracker, RPC servers, probes, attempts)
runs with ``start_new_session=True``, because TVM's servers leave
``popen_worker`` children that only a group signal reaches.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil


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
