"""App deaths in ``logcat -b events`` lines (threadtime format): ``am_proc_died``, ``am_crash``.

ActivityManager writes them (AOSP ``frameworks/base/services/core/java/com/
android/server/am/EventLogTags.logtags``)::

    30011 am_proc_died (User|1|5),(PID|1|5),(Process Name|3),(OomAdj|1|5),(ProcState|1|5)
    30039 am_crash (User|1|5),(PID|1|5),(Process Name|3),(Flags|1|5),(Exception|3),
                   (Message|3),(File|3),(Line|1|5),(Recoverable|1|5)

and logcat prints the values as a list after the tag, e.g.
``05-07 20:05:04.920  2083  3982 I am_proc_died: [0,10798,com.oplus.x:tzupdate,915,19]``
(public captures of real phones; Android before 10 printed only the first
three fields of ``am_proc_died``, and ``Recoverable`` came with Android 12).
A native crash's ``am_crash`` names the exception ``native_crash``. Strings
are printed raw, so a message may itself hold commas: only the fields before
it are split.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The tags that mean an app process ended by itself (``am_kill``, the activity
#: manager's own kill, e.g. ``am force-stop``, is not one of them).
DEATH_TAGS = ("am_proc_died", "am_crash")
#: ``am_crash``'s exception field for a native (signal) crash.
NATIVE_CRASH = "native_crash"

_LINE = re.compile(
    r"^(\d\d-\d\d \d\d:\d\d:\d\d\.\d{3,})\s+\d+\s+\d+\s+I\s+(am_proc_died|am_crash)\s*: \[(.*)\]$"
)


@dataclass(frozen=True)
class AppDeath:
    """One ``am_proc_died`` or ``am_crash`` of a process of the watched package.

    Attributes:
        tag: ``am_proc_died`` or ``am_crash``.
        time: logcat's timestamp, ``MM-DD HH:MM:SS.mmm`` (phone time, no year).
        pid: the process.
        process: its name (``pkg`` or ``pkg:name`` for a secondary process).
        exception: ``am_crash``'s exception class (``native_crash`` for a
            signal); None for ``am_proc_died``.
    """

    tag: str
    time: str
    pid: int
    process: str
    exception: str | None = None

    @property
    def java_crash(self) -> bool:
        """An uncaught Java exception: logcat also holds its ``FATAL EXCEPTION`` block."""
        return self.tag == "am_crash" and self.exception != NATIVE_CRASH

    @property
    def reason(self) -> str:
        """One line for the phone's events, e.g. ``am_crash org.x pid 4242 (java.lang.E)``."""
        cause = f" ({self.exception})" if self.exception else ""
        return f"{self.tag} {self.process} pid {self.pid}{cause}"


def parse_app_death(line: str, package: str) -> AppDeath | None:
    """The death of one of ``package``'s processes that ``line`` reports, if it does.

    Args:
        line: one line of ``logcat -b events`` (threadtime; a trailing newline is fine).
        package: the application id; its secondary processes (``pkg:name``) count too.

    Returns:
        The death, or None for any other line (another tag, another
        package, a ``--------- beginning of`` marker, a line cut short).
    """
    match = _LINE.match(line.rstrip("\r\n"))
    if match is None:
        return None
    time, tag, values = match.groups()
    fields = values.split(",", 5)  # user, pid, process, flags|adj, exception, rest
    if len(fields) < 3 or not fields[1].isdigit():
        return None
    process = fields[2]
    if process != package and not process.startswith(package + ":"):
        return None
    exception = fields[4] if tag == "am_crash" and len(fields) > 4 else None
    return AppDeath(tag, time, int(fields[1]), process, exception)
