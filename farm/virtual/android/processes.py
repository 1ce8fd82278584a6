"""The phone's process table, as ``ps -A``, ``pidof`` and ``/proc/PID/status`` see it.

``ps -A`` is toybox's default layout (fixture ``ps_-A__mtk_tb8168_android13_as_root.txt``):
the header ends with NAME padded to its column (trailing spaces), data rows do
not; numeric columns are right-aligned and a cell that overflows its width is
taken out of the next column's width (toybox ``ps.c`` ``show_ps``). As the shell
user on a user build WCHAN and ADDR read ``0``.

``/proc/PID/status`` (:func:`render_status`) has the lines Linux's
``fs/proc/array.c`` and ``task_mmu.c`` print that farm reads, values right-aligned
in 8 columns before `` kB``. A process mirroring a host process (the RPC app's
``:RPCProcess``, :meth:`ProcessTable.spawn` with ``pid``) reports real memory:
``VmHWM``/``VmRSS`` of the host process doing its work, which is its newest
forked child while a session runs (``farm.virtual.rpc_server_main`` serves each
session in a fork, as ``tvm.rpc.server`` does; the stock app serves it on a
thread of the process itself, so the phone's figure is that process's).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import psutil

PS_HEADER = (
    "USER           PID  PPID     VSZ    RSS WCHAN            ADDR S NAME                       \n"
)

# (pid, user, name, ppid, vsz_kb, rss_kb): processes every Android 13 phone runs;
# pids as in the MTK capture.
_BOOT = (
    (1, "root", "init", 0, 10937576, 14648),
    (2, "root", "[kthreadd]", 0, 0, 0),
    (312, "root", "ueventd", 1, 10817400, 3412),
    (398, "logd", "logd", 1, 10849872, 8032),
    (399, "system", "servicemanager", 1, 10805112, 5024),
    (400, "system", "hwservicemanager", 1, 10838880, 5640),
    (402, "root", "vold", 1, 10929712, 9824),
    (428, "root", "zygote64", 1, 15238088, 165000),
    (540, "system", "surfaceflinger", 1, 11227596, 30812),
    (610, "root", "netd", 1, 10893652, 9556),
    (832, "system", "system_server", 428, 18045124, 341256),
    (2420, "u0_a86", "com.android.systemui", 428, 16079648, 284236),
    (2713, "u0_a81", "com.android.launcher3", 428, 15121900, 206420),
    (6098, "shell", "adbd", 1, 10956904, 6720),
)


@dataclass
class Process:
    """One row of ``ps -A``."""

    pid: int
    ppid: int
    user: str
    name: str
    vsz_kb: int
    rss_kb: int
    state: str = "S"
    host: bool = False  # the pid is a real host process: its memory is read from the host


class ProcessTable:
    """Processes with increasing pids; boot processes are always present."""

    def __init__(self) -> None:
        self.procs: dict[int, Process] = {}
        self.last_pid = 0
        self.boot()

    def boot(self) -> None:
        """Reset to the processes of a freshly booted phone."""
        self.procs.clear()
        self.last_pid = 0
        for pid, user, name, ppid, vsz, rss in _BOOT:
            self.procs[pid] = Process(pid, ppid, user, name, vsz, rss)
        self.last_pid = 6200

    def spawn(self, user: str, name: str, *, ppid_name: str = "zygote64",
              pid: int | None = None) -> Process:
        """Add a process; ``pid`` may be given to mirror a real host pid."""
        if pid is None:
            self.last_pid += 1
            pid = self.last_pid
        ppid = next((p.pid for p in self.procs.values() if p.name == ppid_name), 1)
        proc = Process(pid, ppid, user, name, 14_600_000, 120_000, host=pid is not None)
        self.procs[pid] = proc
        return proc

    def kill(self, pid: int) -> None:
        """Remove a process (no error if it is gone)."""
        self.procs.pop(pid, None)

    def pids_of(self, name: str) -> list[int]:
        """Pids whose name matches exactly, newest first (as toybox pidof prints)."""
        return sorted((p.pid for p in self.procs.values() if p.name == name), reverse=True)

    def next_pid(self) -> int:
        """Allocate a pid for a short-lived command (``ps`` itself, a shell)."""
        self.last_pid += 1
        return self.last_pid


def render_status(proc: Process) -> str:
    """``/proc/PID/status`` of ``proc`` (the lines farm reads; see the module docstring)."""
    hwm_kb, rss_kb = (proc.rss_kb, proc.rss_kb) if not proc.host else _host_memory_kb(proc.pid)
    return (f"Name:\t{proc.name[:15]}\nState:\t{proc.state} (sleeping)\nTgid:\t{proc.pid}\n"
            f"Pid:\t{proc.pid}\nPPid:\t{proc.ppid}\nVmPeak:\t{proc.vsz_kb:8d} kB\n"
            f"VmSize:\t{proc.vsz_kb:8d} kB\nVmHWM:\t{hwm_kb:8d} kB\nVmRSS:\t{rss_kb:8d} kB\n"
            "Threads:\t1\n")


def _host_memory_kb(pid: int) -> tuple[int, int]:
    """(``VmHWM``, ``VmRSS``) in KiB of the host process doing ``pid``'s work.

    That is its newest forked child (same command line: a session) while one
    runs, else ``pid`` itself; (0, 0) once it is gone.
    """
    worker = pid
    with contextlib.suppress(psutil.Error):
        parent = psutil.Process(pid)
        forks = [c for c in parent.children() if c.cmdline() == parent.cmdline()]
        if forks:
            worker = max(forks, key=lambda c: c.create_time()).pid
    try:
        lines = Path(f"/proc/{worker}/status").read_text().splitlines()
    except OSError:
        return 0, 0
    values = dict(line.split(":", 1) for line in lines if ":" in line)

    def kb(key: str) -> int:
        number = values.get(key, "0 kB").split()[0]
        return int(number) if number.isdigit() else 0

    return kb("VmHWM"), kb("VmRSS")


def render_ps(rows: list[Process]) -> str:
    """``ps -A`` output for ``rows`` (already in pid order)."""
    out = [PS_HEADER]
    for p in rows:
        cells = [
            (p.user, -8),
            (str(p.pid), 9),
            (str(p.ppid), 5),
            (str(p.vsz_kb), 7),
            (str(p.rss_kb), 6),
            ("0", -16),
            ("0", 4),
            (p.state, 1),
        ]
        line, slack = [], 0
        for i, (text, width) in enumerate(cells):
            w = abs(width) - slack
            cell = text.ljust(w) if width < 0 else text.rjust(w)
            slack = len(text) - w if len(text) > w else 0
            line.append(cell if i == 0 else " " + cell)
        out.append("".join(line) + " " + p.name + "\n")
    return "".join(out)
