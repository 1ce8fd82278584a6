r"""Find app crashes in ``logcat`` output (``threadtime`` format, the default).

A line is ``MM-DD HH:MM:SS.mmm  PID  TID L TAG: message`` with PID and TID
right-aligned to width 5 (AOSP ``system/logging/liblog/logprint.cpp``). A Java
crash is logged by ``AndroidRuntime`` at level ``E`` as
``FATAL EXCEPTION: <thread>``, then ``Process: <name>, PID: <pid>``, then the
exception line, then ``\tat ...`` frames (AOSP ``RuntimeInit.java``
``KillApplicationHandler``). Other processes' lines may be interleaved, so a
crash is followed per PID.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from farm.device._text import as_text, excerpt

_LINE = re.compile(
    r"^(\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\s+(\d+)\s+(\d+)\s+([VDIWEFA])\s+(.*?)\s*: (.*)$"
)
_PROCESS = re.compile(r"^Process: (\S+), PID: (\d+)$")


@dataclass(frozen=True)
class Crash:
    """One ``FATAL EXCEPTION`` of the package's process.

    Attributes:
        time: logcat's timestamp, ``MM-DD HH:MM:SS.mmm`` (phone local time, no year).
        pid: the crashed process.
        process: its name (``pkg`` or ``pkg:service`` for a secondary process).
        exception: the exception line, e.g. ``java.lang.NullPointerException: ...``.
    """

    time: str
    pid: int
    process: str
    exception: str


def find_fatal_exceptions(output: str | bytes, package: str) -> list[Crash]:
    """Return the fatal Java exceptions of ``package``'s processes in a logcat dump.

    Args:
        output: stdout of ``logcat -d`` (any buffers, threadtime format).
        package: the application id; its secondary processes (``pkg:name``) count too.

    Returns:
        The crashes in log order; ``[]`` when there is none.

    Raises:
        ValueError: the output is not empty but has no threadtime line at all
            (another ``-v`` format was used).
    """
    text = as_text(output)
    crashes: list[Crash] = []
    # pid -> [time, process name or None] for crash blocks still being read.
    pending: dict[int, list] = {}
    seen_line = False
    for raw in text.split("\n"):
        match = _LINE.match(raw)
        if match is None:
            continue
        seen_line = True
        time, pid_text, _tid, level, tag, message = match.groups()
        pid = int(pid_text)
        if tag != "AndroidRuntime" or level != "E":
            continue
        if message.startswith("FATAL EXCEPTION:"):
            pending[pid] = [time, None]
        elif pid in pending and pending[pid][1] is None:
            process = _PROCESS.match(message)
            if process is None:
                del pending[pid]  # not the block RuntimeInit prints
            else:
                pending[pid][1] = process.group(1)
        elif pid in pending:
            crash_time, process_name = pending.pop(pid)
            if process_name == package or process_name.startswith(package + ":"):
                crashes.append(Crash(crash_time, pid, process_name, message.strip()))
    if text.strip() and not seen_line:
        raise ValueError(f"logcat: no threadtime line in {excerpt(text)!r}")
    return crashes
