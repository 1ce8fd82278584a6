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

Phase boundaries lie on a fixed timeline (``t0 + k * P``), so waking up late
shortens the next phase instead of adding up: the long-run fraction stays F.

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


def serve(pgid: int, period_s: float, commands: _Commands) -> None:
    """Throttle group ``pgid`` at the speeds read from ``commands`` until it is gone.

    Raises:
        _Stop: input ended or a SIGTERM/SIGINT arrived (the group was continued).
    """
    speed = 1.0
    start = time.monotonic()
    cycle = 0
    try:
        while True:
            if speed >= 1.0:
                new = commands.next_speed(time.monotonic() + _IDLE_CHECK_S)
                if new is None:
                    os.killpg(pgid, 0)  # ProcessLookupError once the group is gone
                    continue
            else:
                boundary = start + cycle * period_s
                new = commands.next_speed(boundary)
                if new is None:
                    os.killpg(pgid, signal.SIGSTOP)
                    stop_until = boundary + (1.0 - speed) * period_s
                    left = stop_until - time.monotonic()
                    if left > 0:
                        time.sleep(left)
                    os.killpg(pgid, signal.SIGCONT)
                    cycle += 1
                    now = time.monotonic()
                    if now > start + (cycle + 1) * period_s:  # far behind (host busy): skip
                        cycle = int((now - start) / period_s)
                    continue
            speed, start, cycle = new, time.monotonic(), 0
            _answer(speed)
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
