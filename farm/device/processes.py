r"""Parse ``pidof``, toybox ``ps -A`` and ``/proc/PID/status``.

``pidof`` (``landley/toybox`` ``toys/lsb/pidof.c``) prints matching PIDs on one
line separated by spaces, or nothing (exit 1) when none runs.

``ps -A`` (toybox ``toys/posix/ps.c``) prints
``USER PID PPID VSZ RSS WCHAN ADDR S NAME``; the header's last title is padded
with trailing spaces, rows are not. Widths grow with long cells (a long WCHAN
pushes later columns right), so rows are split on whitespace. Kernel threads
are ``[name]``.

``/proc/PID/status`` (Linux ``fs/proc/task_mmu.c`` ``task_mem``) has one
``Key:\tvalue`` per line; the memory lines read ``VmHWM:\t   12345 kB``, the
value right-aligned in 8 columns. ``VmHWM`` is the process's peak resident set
("high water mark") since it started; ``VmRSS`` the resident set now.
"""

from __future__ import annotations

from dataclasses import dataclass

from farm.device._text import as_text, excerpt

_PS_HEADER = ("USER", "PID", "PPID", "VSZ", "RSS", "WCHAN", "ADDR", "S", "NAME")


@dataclass(frozen=True)
class Process:
    """One row of ``ps -A``.

    Attributes:
        user: owner, e.g. ``root``, ``u0_a123``.
        pid: process id.
        ppid: parent process id.
        name: process name (``[name]`` for kernel threads).
        state: one-letter state (``S`` sleeping, ``R`` running, ...).
    """

    user: str
    pid: int
    ppid: int
    name: str
    state: str = ""


def parse_pidof(output: str | bytes) -> list[int]:
    """Parse ``pidof NAME`` output.

    Args:
        output: stdout; empty when no process matches.

    Returns:
        The PIDs, in printed order; ``[]`` when none runs.

    Raises:
        ValueError: a token is not a PID.
    """
    tokens = as_text(output).split()
    if not all(token.isdigit() for token in tokens):
        raise ValueError(f"pidof: cannot read {excerpt(as_text(output))!r}")
    return [int(token) for token in tokens]


def parse_ps_a(output: str | bytes) -> list[Process]:
    """Parse ``ps -A`` output (toybox layout, Android 8+).

    Args:
        output: stdout of ``ps -A``.

    Returns:
        One :class:`Process` per row.

    Raises:
        ValueError: the header is not the toybox one or a row is unreadable.
    """
    lines = [line for line in as_text(output).split("\n") if line.strip()]
    if not lines or tuple(lines[0].split()) != _PS_HEADER:
        raise ValueError(f"ps -A: unexpected header {excerpt(lines[0]) if lines else ''!r}")
    processes = []
    for line in lines[1:]:
        cells = line.split(maxsplit=8)
        if len(cells) != 9 or not (cells[1].isdigit() and cells[2].isdigit()):
            raise ValueError(f"ps -A: cannot read row {line!r}")
        processes.append(Process(cells[0], int(cells[1]), int(cells[2]), cells[8], cells[7]))
    return processes


def parse_vm_hwm_kb(output: str | bytes) -> int:
    """The peak resident set (``VmHWM``) of a ``cat /proc/PID/status``, in KiB.

    Raises:
        ValueError: no ``VmHWM:`` line with a ``kB`` value (a kernel thread has none).
    """
    for line in as_text(output).splitlines():
        key, _, value = line.partition(":")
        if key == "VmHWM":
            number, _, unit = value.strip().partition(" ")
            if number.isdigit() and unit == "kB":
                return int(number)
            break
    raise ValueError(f"/proc/PID/status: no VmHWM in {excerpt(as_text(output))!r}")
