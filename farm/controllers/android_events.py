"""A phone's app deaths as they happen: one ``logcat -b events`` follower through adb.

When an app process dies, ActivityManager writes ``am_proc_died`` (and, for an
uncaught exception, ``am_crash`` just before) to the events buffer
(:mod:`farm.device.eventlog`). :func:`open_app_events` follows
``logcat -b events -T <now> -s am_proc_died am_crash`` and yields the deaths of
the RPC app's processes; what to do about one is the fleet's
(:mod:`farm.fleet.app_watch`).

``-T <phone time>`` makes logcat print only what comes after the follower
started (without it logcat prints the whole buffer first, old deaths
included); the time is the phone's own (``date +%s``), as the phone's clock
may differ from the host's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from farm.device.eventlog import DEATH_TAGS, AppDeath, parse_app_death
from farm.errors import PhoneFault
from farm.provision.launch import PACKAGE

if TYPE_CHECKING:
    from farm.adb import Adb, ShellStream

__all__ = ["START_TIMEOUT_S", "AdbAppEvents", "events_argv", "open_app_events"]

#: Deadline of each call that starts a follower (``date``, then opening the stream).
START_TIMEOUT_S = 15.0


def events_argv(since_s: int) -> list[str]:
    """``logcat`` following the events buffer's app deaths logged from ``since_s`` on.

    Args:
        since_s: the phone's clock, epoch seconds (``date +%s``).
    """
    # -T takes a count when all digits, so the time carries its milliseconds.
    return ["logcat", "-b", "events", "-T", f"{since_s}.000", "-s", *DEATH_TAGS]


class AdbAppEvents:
    """One open follower of a phone's events buffer (:class:`~farm.adb.ShellStream`).

    Args:
        stream: the open ``logcat -b events`` stream.
        package: the app whose processes' deaths are yielded.
    """

    def __init__(self, stream: ShellStream, package: str = PACKAGE) -> None:
        self._stream = stream
        self._package = package

    def deaths(self) -> Iterator[AppDeath]:
        """Each death of one of the app's processes, until the stream ends or is closed.

        Raises:
            PhoneFault: adb failed while following.
        """
        for line in self._stream.lines():
            death = parse_app_death(line, self._package)
            if death is not None:
                yield death

    def close(self) -> None:
        """Close the stream (from any thread); :meth:`deaths` then ends."""
        self._stream.close()


def open_app_events(adb: Adb, serial: str, timeout_s: float = START_TIMEOUT_S) -> AdbAppEvents:
    """Follow ``serial``'s app deaths from the phone's now on.

    Raises:
        PhoneFault: the phone's clock is unreadable, or adb failed to start the stream.
    """
    now = adb.shell(serial, ["date", "+%s"], timeout_s=timeout_s, check=True).out
    if not now.strip().isdigit():
        raise PhoneFault(serial, f"date +%s printed {now.strip()[:40]!r}")
    return AdbAppEvents(adb.stream(serial, events_argv(int(now)), timeout_s=timeout_s))
