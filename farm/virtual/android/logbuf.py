"""The phone's log buffers and ``logcat``'s threadtime format.

Format (AOSP ``liblog/logprint.cpp``, threadtime): ``MM-DD HH:MM:SS.mmm %5d %5d
L %-8s: msg``; a multi-line message prints one line per message line with the
same prefix. When output moves to another buffer logcat prints ``---------
beginning of <buffer>`` (fixture ``logcat_crash_fatal_exception__calnotify_emulator.txt``).
"""

from __future__ import annotations

import asyncio
import calendar
import re
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

    def now_s(self) -> float:
        """The phone's wall clock, epoch seconds (what the next entry is stamped with)."""
        return self._wall()

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


_EPOCH = re.compile(r"^(\d+)\.(\d+)$")
_STAMP = re.compile(r"^(?:(\d{4})-)?(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)$")


def parse_time(text: str, now_s: float) -> float | None:
    """A ``logcat -T``/``-t`` time as epoch seconds, or None if it is not one.

    Forms (AOSP ``logcat.cpp`` ``parseTime``): ``sssss.mmm``, ``YYYY-MM-DD
    hh:mm:ss.mmm`` and ``MM-DD hh:mm:ss.mmm`` (this year, as threadtime prints
    it: UTC on the virtual phone). ``now_s`` gives the year of the last form.
    """
    epoch = _EPOCH.match(text)
    if epoch:
        return int(epoch[1]) + float(f"0.{epoch[2]}")
    stamp = _STAMP.match(text)
    if not stamp:
        return None
    year = int(stamp[1]) if stamp[1] else time.gmtime(now_s).tm_year
    month, day, hour, minute, second = (int(stamp[i]) for i in range(2, 7))
    return calendar.timegm((year, month, day, hour, minute, second)) + float(f"0.{stamp[7]}")


def backlog(entries: list[LogEntry], start: str | None, now_s: float) -> list[LogEntry]:
    """The entries logcat prints before following: all, the last N, or those since a time.

    Args:
        entries: the ring, oldest first.
        start: ``-t``/``-T``'s value (digits: a line count; else a time for
            :func:`parse_time`), or None.
        now_s: the phone's clock, for the year of a ``MM-DD`` time.

    Raises:
        ValueError: ``start`` is neither a count nor a time (logcat's message).
    """
    if start is None:
        return entries
    if start.isdigit():
        return entries[-int(start):] if int(start) else entries
    since_s = parse_time(start, now_s)
    if since_s is None:
        raise ValueError(f"-T '{start}' not in time format")
    return [e for e in entries if e.wall_s >= since_s]
