"""A virtual phone's performance knob: its RPC process group runs at a fraction of its speed.

Each RPC process has a :class:`Throttle`: at most one throttler process
(:mod:`farm.virtual.throttle_main`), which duty-cycles the group with
SIGSTOP/SIGCONT at the speed it was last sent (1.0: it leaves it alone). The phone sets
the speed from two sources, multiplied: the ``throttle`` fault
(``farm-phones fault SERIAL throttle --factor F``) and its thermal status
(:meth:`farm.virtual.android.physics.Physics.speed_factor`), as a hot phone's
governor lowers its clocks.

The duty cycle sets the share of wall time the group may run, so it is
exact when the group has a CPU to itself, as a phone does. On a host whose
CPUs are busy with other work, the scheduler hands a stopped group's time to
that work and gives it back after (CFS sleeper credit), and the slowdown is
smaller than asked, and the group resumes late: give the phone's process
priority there (:func:`realtime` or :func:`favour`, as
:func:`farm.virtual.testing.rpc_app` does where it may).

Why duty-cycling rather than a cgroup v2 ``cpu.max``: that needs a writable,
delegated cgroup v2 hierarchy, which hosts with cgroup v1 or an unprivileged
container (like farm's CI) do not have; stopping a group works everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys

#: One stop-and-run cycle. Short enough that a default GEMM 256 sample (10 runs
#: of ~0.3 ms once virtual phones' targets name the host's AVX-512) spans a few
#: cycles and sees a smooth slowdown, not a lucky window between stops (at 5 ms
#: a 0.95 knob left such samples untouched); long enough that the two signals
#: per cycle cost little (6% of a core at 0.95; 0.2 ms cost 24%). Each stop is
#: accounted against the time the group was really stopped
#: (:mod:`farm.virtual.throttle_main`), so a late wake-up does not add up.
PERIOD_MS = 1.0
#: How long a throttler may take to answer a speed (its start-up included, on a busy host).
ANSWER_TIMEOUT_S = 30.0
#: How long a throttler may take to continue its group and exit at end of input.
STOP_TIMEOUT_S = 10.0


#: The throttler's real-time priority (SCHED_FIFO), else its autogroup nice: it
#: sleeps nearly all the time, but must wake on time on a busy host, or its
#: stops run long. Above :data:`QUIET_RT_PRIORITY`, so it preempts a quiet phone.
THROTTLER_RT_PRIORITY = 2
THROTTLER_NICE = -20
#: Real-time priority (SCHED_RR) of a "quiet phone" (:func:`farm.virtual.testing.rpc_app`).
QUIET_RT_PRIORITY = 1


def realtime(pid: int, priority: int) -> bool:
    """Put ``pid`` under a real-time policy: SCHED_FIFO, or SCHED_RR for ``priority`` 1.

    A real-time process runs before every normal one, so a busy host delays it
    by no more than the other real-time work; the kernel's RT throttling
    (``kernel.sched_rt_runtime_us``, 95% by default) still leaves the host
    some time. Needs CAP_SYS_NICE.

    Returns:
        Whether it was set.
    """
    policy = os.SCHED_RR if priority == QUIET_RT_PRIORITY else os.SCHED_FIFO
    try:
        os.sched_setscheduler(pid, policy, os.sched_param(priority))
    except OSError:
        return False
    return True


def favour(pid: int, nice: int) -> bool:
    """Give ``pid``'s session a CPU share as if niced to ``nice``, where the host allows it.

    Linux schedules sessions as autogroups (``kernel.sched_autogroup_enabled``,
    sched(7) "The autogroup feature"), so a process's own nice value only
    counts within its session; the session's share is set through
    ``/proc/PID/autogroup``. Lowering it needs CAP_SYS_NICE.

    Returns:
        Whether it was set (False without autogroups or the capability).
    """
    try:
        with open(f"/proc/{pid}/autogroup", "w") as handle:
            handle.write(str(nice))
    except OSError:
        return False
    return True


def check_speed(factor: float) -> float:
    """``factor`` if it is a valid speed, in (0, 1].

    Raises:
        ValueError: not in (0, 1].
    """
    if not 0.0 < factor <= 1.0:
        raise ValueError(f"speed factor must be in (0, 1], got {factor:g}")
    return factor


class Throttle:
    """The throttler of one process group (create it on the loop that will drive it).

    The throttler process starts at the first speed below 1 and then stays,
    idle at speed 1, until :meth:`clear`; a change of speed is one line to it.

    Args:
        pgid: the process group (the RPC process's pid: it leads its own group).
    """

    def __init__(self, pgid: int) -> None:
        self.pgid = pgid
        self.speed = 1.0
        self._proc: asyncio.subprocess.Process | None = None
        # One exchange on the pipe at a time: a fault and the heat model's
        # once-a-second check may both change the speed at once.
        self._exchange = asyncio.Lock()

    async def set_speed(self, factor: float) -> None:
        """Run the group at ``factor`` of its speed from now on (1.0: full speed).

        Returns once the new speed is in effect (the throttler said so).
        Concurrent calls take effect one after the other.

        Raises:
            ValueError: ``factor`` is not in (0, 1].
            OSError: the throttler could not be started or did not answer in time.
        """
        check_speed(factor)
        async with self._exchange:
            await self._set_speed(factor)

    async def _set_speed(self, factor: float) -> None:
        if factor == self.speed:
            return
        if self._proc is None or self._proc.returncode is not None:
            if factor == 1.0:
                self.speed = 1.0
                return
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "farm.virtual.throttle_main",
                "--pgid", str(self.pgid),
                "--period-ms", repr(PERIOD_MS),
                "--parent-pid", str(os.getpid()),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,  # its own autogroup, to favour (see favour)
            )  # fmt: skip
        proc = self._proc
        if proc.stdin is None or proc.stdout is None:  # PIPE above
            raise OSError("the throttler was started without pipes")
        try:
            proc.stdin.write(f"{factor!r}\n".encode())
            await proc.stdin.drain()
            answer = await asyncio.wait_for(proc.stdout.readline(), ANSWER_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            await self.clear()
            raise OSError(f"the throttler of process group {self.pgid} did not answer") from exc
        if answer.split() != [b"speed", repr(factor).encode()]:
            await self.clear()
            raise OSError(f"the throttler of process group {self.pgid} answered {answer!r}")
        self.speed = factor

    async def clear(self) -> None:
        """End the throttler, leaving the group running at full speed; idempotent."""
        proc, self._proc = self._proc, None
        self.speed = 1.0
        if proc is None:
            return
        if proc.returncode is None:
            if proc.stdin is not None:
                proc.stdin.close()  # end of input: it continues the group and exits
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        # Whatever the throttler did last, the group runs (a gone group is fine).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signal.SIGCONT)
