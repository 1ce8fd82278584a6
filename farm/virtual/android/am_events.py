"""ActivityManager's event-log entries about app processes, as system_server writes them.

Tags and fields are AOSP ``frameworks/base/services/core/java/com/android/server/am/
EventLogTags.logtags``::

    30011 am_proc_died (User|1|5),(PID|1|5),(Process Name|3),(OomAdj|1|5),(ProcState|1|5)
    30023 am_kill (User|1|5),(PID|1|5),(Process Name|3),(OomAdj|1|5),(Reason|3)
    30039 am_crash (User|1|5),(PID|1|5),(Process Name|3),(Flags|1|5),(Exception|3),
                   (Message|3),(File|3),(Line|1|5),(Recoverable|1|5)

``logcat -b events`` prints the values as ``[v1,v2,...]`` after the tag, e.g.
``I am_proc_died: [0,25414,com.example.multiopen,0,2]`` (public captures of
real phones; the ``Recoverable`` field of ``am_crash`` came with Android 12).
When they are written (AOSP ``ActivityManagerService``):

- ``am_crash``: ``handleApplicationCrashInner``, as the crashing process reports
  its uncaught exception, before the process dies;
- ``am_proc_died``: ``appDiedLocked``, when the process's binder dies (a crash,
  a ``kill``, an exit), unless the activity manager killed it itself;
- ``am_kill``: ``ProcessRecord.killLocked``, when the activity manager kills a
  process (``am force-stop``: reason ``stop <package> due to from pid <pid>``);
  no ``am_proc_died`` follows it.
"""

from __future__ import annotations

from farm.virtual.android.logbuf import LogBuffer

#: system_server's pid on the virtual phone, and the binder thread that logs deaths.
AM_PID = 832
_BINDER_TID = 2345
#: OomAdj and ProcState of a process whose activity is on top (``FOREGROUND_APP_ADJ``
#: 0, ``PROCESS_STATE_TOP`` 2) and of one in the back stack (``PREVIOUS_APP_ADJ`` 700,
#: ``PROCESS_STATE_CACHED_ACTIVITY`` 16), the pairs real captures show.
TOP = (0, 2)
BACKGROUND = (700, 16)
#: ``ApplicationInfo.flags`` of a debuggable app with code, as ``am_crash`` prints them.
_APP_FLAGS = 0x20C8BE46


def _event(logs: LogBuffer, tag: str, values: list[object]) -> None:
    logs.log(AM_PID, "I", tag, "[" + ",".join(map(str, values)) + "]", buffer="events",
             tid=_BINDER_TID)


def proc_died(logs: LogBuffer, pid: int, process: str, state: tuple[int, int]) -> None:
    """``am_proc_died``: ``process`` (``pid``) died by itself; ``state`` is (OomAdj, ProcState)."""
    _event(logs, "am_proc_died", [0, pid, process, *state])


def killed(logs: LogBuffer, pid: int, process: str, state: tuple[int, int], reason: str) -> None:
    """``am_kill``: the activity manager killed ``process`` for ``reason``."""
    _event(logs, "am_kill", [0, pid, process, state[0], reason])


def crashed(logs: LogBuffer, pid: int, process: str, exception: str, *, sdk: int,
            file: str = "MainActivity.java", line: int = 0) -> None:
    """``am_crash``: ``process`` reports the uncaught ``exception`` (``Class: message``)."""
    name, _, message = exception.partition(": ")
    values: list[object] = [0, pid, process, _APP_FLAGS, name, message, file, line]
    if sdk >= 31:  # Android 12 added (Recoverable|1|5)
        values.append(0)
    _event(logs, "am_crash", values)
