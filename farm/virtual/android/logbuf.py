"""The phone's log buffers and ``logcat``'s threadtime format.

Format (AOSP ``liblog/logprint.cpp``, threadtime): ``MM-DD HH:MM:SS.mmm %5d %5d
L %-8s: msg``; a multi-line message prints one line per message line with the
same prefix. When output moves to another buffer logcat prints ``---------
beginning of <buffer>`` (fixture ``logcat_crash_fatal_exception__calnotify_emulator.txt``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

LEVELS = "VDIWEF"
DEFAULT_BUFFERS = ("main", "system", "crash")
ALL_BUFFERS = ("main", "system", "crash", "events", "radio", "kernel")


@dataclass(frozen=True)
class LogEntry:
    """One logged message."""

    wall_s: float
    pid: int
    tid: int
    level: str
    tag: str
    message: str
    buffer: str = "main"


class LogBuffer:
    """Ring of log entries, newest last.

    Args:
        wall_clock: seconds since the epoch (``time.time`` unless injected).
        capacity: entries kept per phone before the oldest are dropped.
    """

    def __init__(self, wall_clock: Callable[[], float] = time.time, capacity: int = 20000) -> None:
        self._wall = wall_clock
        self.capacity = capacity
        self.entries: list[LogEntry] = []
        self.appended = 0  # entries ever logged: a cursor for followers
        self._grown: asyncio.Event | None = None

    def log(self, pid: int, level: str, tag: str, message: str, *, buffer: str = "main",
            tid: int | None = None) -> None:
        """Append one message (level one of ``VDIWEF``); wakes followers."""
        tid = tid if tid is not None else pid
        self.entries.append(LogEntry(self._wall(), pid, tid, level, tag, message, buffer))
        self.appended += 1
        if len(self.entries) > self.capacity:
            del self.entries[: len(self.entries) - self.capacity]
        if self._grown is not None:
            self._grown.set()

    def since(self, cursor: int) -> list[LogEntry]:
        """Entries logged after ``cursor`` (an earlier :attr:`appended`) still in the ring."""
        return self.entries[len(self.entries) - min(self.appended - cursor, len(self.entries)):]

    async def wait_beyond(self, cursor: int) -> None:
        """Return once an entry past ``cursor`` was logged (call on the phone's loop)."""
        while self.appended <= cursor:
            if self._grown is None:
                self._grown = asyncio.Event()
            self._grown.clear()
            await self._grown.wait()

    def clear(self, buffers: Iterable[str] = DEFAULT_BUFFERS) -> None:
        """``logcat -c``: drop the entries of ``buffers``."""
        drop = set(buffers)
        self.entries = [e for e in self.entries if e.buffer not in drop]


def format_threadtime(entry: LogEntry) -> str:
    r"""The threadtime lines of one entry, each ending in ``\n``."""
    t = time.gmtime(entry.wall_s)
    ms = int((entry.wall_s % 1) * 1000)
    stamp = f"{t.tm_mon:02d}-{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{ms:03d}"
    prefix = f"{stamp} {entry.pid:5d} {entry.tid:5d} {entry.level} {entry.tag:<8}: "
    return "".join(prefix + line + "\n" for line in entry.message.split("\n"))


def render(
    entries: Iterable[LogEntry], buffers: Iterable[str], accept: Callable[[LogEntry], bool]
) -> str:
    """``logcat -d`` output for the selected buffers and filter."""
    return render_from(entries, buffers, accept, None)[0]


def render_from(
    entries: Iterable[LogEntry], buffers: Iterable[str], accept: Callable[[LogEntry], bool],
    current: str | None,
) -> tuple[str, str | None]:
    """Like :func:`render`, continuing output that last printed buffer ``current``.

    Returns:
        The text and the buffer its last line came from (for the next batch).
    """
    wanted = set(buffers)
    out = []
    for entry in entries:
        if entry.buffer not in wanted or not accept(entry):
            continue
        if entry.buffer != current:
            out.append(f"--------- beginning of {entry.buffer}\n")
            current = entry.buffer
        out.append(format_threadtime(entry))
    return "".join(out), current


def make_filter(specs: list[str], silent_default: bool) -> Callable[[LogEntry], bool]:
    """A predicate from logcat filterspecs (``TAG:L``, ``*:S``).

    Args:
        specs: filterspecs in order; the last one for a tag wins.
        silent_default: ``-s`` was given (``*:S``).
    """
    rules: dict[str, int] = {}
    default = len(LEVELS) if silent_default else 0
    for spec in specs:
        tag, _, level = spec.partition(":")
        rank = len(LEVELS) if level.upper() == "S" else LEVELS.find(level.upper() or "V")
        rank = max(rank, 0)
        if tag == "*":
            default = rank
        else:
            rules[tag] = rank

    def accept(entry: LogEntry) -> bool:
        return LEVELS.find(entry.level) >= rules.get(entry.tag, default)

    return accept
