"""The throttler: run a process group at a fraction of its speed by duty-cycling it.

Run by :class:`farm.virtual.throttle.Throttle` as
``python -m farm.virtual.throttle_main --pgid G --period-ms P --parent-pid PID``.
It reads speeds from stdin, one per line (``0.9``; ``1`` for full speed), and
answers each with ``speed <F>`` on stdout once it is in effect. At a speed F
below 1, every period it stops the group (``SIGSTOP``) for ``(1 - F) * P`` and
lets it run (``SIGCONT``) for the rest, so code that runs for several periods
(a ~10 ms kernel, with P a few ms) takes ``1 / F`` times as long: a phone
whose governor holds its clocks at F of their peak. Changing the speed is a
line on a pipe, not a new process, so a test can switch it between samples.

Each stop is accounted: its length is what the group still owes, ``1 - F``
of the wall time since the speed was set less the time it has already been
stopped (measured from before the SIGSTOP to after the SIGCONT), so a stop
that ran long because the throttler woke late (a VM's timer, tens of us) is
taken back from the next one instead of adding up, and one cut short is made
up. The slowdown of any stretch of a few periods is then F within one stop's
wake-up error, wherever in the cycle a timed run starts. Stops asked for
their nominal ``(1 - F) * P`` on a fixed timeline, as before, made a 0.95
knob slow GEMM 256 samples (~3 ms) by 2.5-4.6% (median ratio 1.033 over ten
recordings on the loaded 2-core VM) instead of 5.3%, and spread them wider
than full speed (robust CV 3.7% against 1.9% at load 2); this rule gives
ratios of 1.047-1.063 (median 1.054) there (docs/benchmarks.md).
The stop's last :data:`_SPIN_S` are waited for by spinning, not sleeping: the
group is stopped then, so its CPU is free, and a sleep's wake-up is what
runs late. A debt over :data:`_MAX_DEBT_PERIODS` periods' stops (the
throttler itself held off the CPU for long) is forgiven rather than repaid
in one long stop.

A stopped group must never stay stopped. At end of input, on SIGTERM or
SIGINT (SIGTERM is also what the kernel sends when the parent dies,
``PR_SET_PDEATHSIG``) the group is continued before exiting; once the group is
gone the throttler exits by itself. Only a SIGKILL of the throttler itself
during a stop window would leave the group stopped, and farm never sends one
to a throttler that is still answering.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import sys
import time
from types import FrameType

from farm.procs import set_parent_death_signal
from farm.virtual.throttle import THROTTLER_NICE, THROTTLER_RT_PRIORITY, favour, realtime

#: How often an idle throttler (speed 1) checks that its group still exists.
_IDLE_CHECK_S = 1.0
#: The end of a stop is waited for by spinning this long (s), the rest by sleeping.
_SPIN_S = 30e-6
#: Stop time owed beyond this many periods' stops is forgiven (module doc).
_MAX_DEBT_PERIODS = 4


class _Stop(Exception):
    """SIGTERM or SIGINT arrived, or input ended: continue the group and exit."""


def _raise_stop(_signum: int, _frame: FrameType | None) -> None:
    raise _Stop


class _Commands:
    """Speed lines from a file descriptor, read without blocking past a deadline."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""

    def next_speed(self, deadline: float | None) -> float | None:
        """The next speed sent before ``deadline`` (monotonic s), or None; None waits forever.

        Raises:
            _Stop: input ended.
            ValueError: a line is not a number in (0, 1].
        """
        while b"\n" not in self._buffer:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self._fd, 4096)
            if not chunk:
                raise _Stop
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        speed = float(line)
        if not 0.0 < speed <= 1.0:
            raise ValueError(f"speed {speed:g} is not in (0, 1]")
        return speed


def _answer(speed: float) -> None:
    sys.stdout.write(f"speed {speed!r}\n")
    sys.stdout.flush()


def _hold_until(deadline: float) -> None:
    """Return at ``deadline`` (monotonic s): sleep, then spin its last :data:`_SPIN_S`."""
    left = deadline - time.monotonic() - _SPIN_S
    if left > 0:
        time.sleep(left)
    while time.monotonic() < deadline:
        pass


class _Account:
    """The stop time one speed owes and has served since it was set (module doc)."""

    def __init__(self, speed: float, period_s: float) -> None:
        self.speed = speed
        self.period_s = period_s
        self.start = time.monotonic()
        self.stopped_s = 0.0
        #: When the next stop is due (monotonic s): after one run phase.
        self.next_stop = self.start + speed * period_s

    def owed_s(self, now: float) -> float:
        """How long to stop from ``now`` so that the stopped share is ``1 - speed`` after it.

        ``stopped + s = (1 - F) * (now - start + s)``, so ``s = ((1 - F) * (now - start)
        - stopped) / F``.
        """
        owed = ((1.0 - self.speed) * (now - self.start) - self.stopped_s) / self.speed
        if owed > _MAX_DEBT_PERIODS * (1.0 - self.speed) * self.period_s:
            # Forgiven: start the account again from here with one stop owed.
            self.start, self.stopped_s = now, 0.0
            owed = (1.0 - self.speed) * self.period_s
        return owed

    def served(self, stop_s: float, resumed: float) -> None:
        """The group was stopped ``stop_s`` and continued at ``resumed`` (monotonic s)."""
        self.stopped_s += stop_s
        self.next_stop = resumed + self.speed * self.period_s


def serve(pgid: int, period_s: float, commands: _Commands) -> None:
    """Throttle group ``pgid`` at the speeds read from ``commands`` until it is gone.

    Raises:
        _Stop: input ended or a SIGTERM/SIGINT arrived (the group was continued).
    """
    account = _Account(1.0, period_s)
    try:
        while True:
            if account.speed >= 1.0:
                new = commands.next_speed(time.monotonic() + _IDLE_CHECK_S)
                if new is None:
                    os.killpg(pgid, 0)  # ProcessLookupError once the group is gone
                    continue
            else:
                new = commands.next_speed(account.next_stop)
                if new is None:
                    # Timed from before the signal: the group stops within the
                    # call, and a stop timed from its return ran ~1% long a period.
                    stopped_at = time.monotonic()
                    owed = account.owed_s(stopped_at)
                    if owed <= 0:  # the last stop ran long enough for this one too
                        account.served(0.0, stopped_at)
                        continue
                    os.killpg(pgid, signal.SIGSTOP)
                    _hold_until(stopped_at + owed)
                    os.killpg(pgid, signal.SIGCONT)
                    resumed = time.monotonic()
                    account.served(resumed - stopped_at, resumed)
                    continue
            account = _Account(new, period_s)
            _answer(new)
    except ProcessLookupError:
        return
    finally:
        # No _Stop may cut this short: the group must run again.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGCONT)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="farm.virtual.throttle_main")
    parser.add_argument("--pgid", type=int, required=True)
    parser.add_argument("--period-ms", type=float, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    args = parser.parse_args(argv)
    if args.period_ms <= 0:
        parser.error("--period-ms must be above 0")
    return args


def main(argv: list[str] | None = None) -> int:
    """Throttle until the group ends, input ends or a SIGTERM/SIGINT (exit 0).

    Bad arguments exit 2, a bad speed line 1 (the group is continued first).
    """
    args = _parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != args.parent_pid:  # the parent died before the death signal was set
        return 0
    # Best effort, so that it wakes on time on a busy host; it sleeps nearly always.
    if not realtime(os.getpid(), THROTTLER_RT_PRIORITY):
        favour(os.getpid(), THROTTLER_NICE)
    with contextlib.suppress(_Stop):
        try:
            serve(args.pgid, args.period_ms / 1000.0, _Commands(sys.stdin.fileno()))
        except ValueError as exc:
            sys.stderr.write(f"throttler: {exc}\n")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
