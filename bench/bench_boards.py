"""What one Linux board costs farm over SSH: discovery, facts, a health reading, server recovery.

Reproduce with::

    python bench/bench_boards.py --boards 4 --reads 50

It starts a private tracker and N virtual boards (real ``sshd``s on loopback,
:mod:`farm.virtual.board`) and times, through :class:`farm.controllers.board.BoardController`:
the first SSH connection (key exchange and authentication) of each board;
``discover()`` of all N on open connections; ``facts()``; ``read_health()``
(one round trip: thermal zones, loadavg, meminfo, df, server liveness);
``gating_reading()``; and, after ``kill_server()``, the first rung of the
ladder (``restart_app``: runtime check + detached start) until the board's key
is registered at the tracker again. Latencies are p50/p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from _stats import percentile

from farm import composition
from farm.clock import wait_until
from farm.controllers.board import BoardController
from farm.tvm.tracker import TrackerProcess, summary
from farm.virtual.board_testing import virtual_boards


def _times_ms(fn: Callable[[], object], count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def _line(what: str, times_ms: list[float]) -> str:
    return (f"{what:<34} p50 {percentile(times_ms, 50):8.1f} ms   "
            f"p95 {percentile(times_ms, 95):8.1f} ms   (n={len(times_ms)})")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", type=int, default=4, help="number of virtual boards (N)")
    parser.add_argument("--reads", type=int, default=50, help="readings timed per operation")
    parser.add_argument("--restarts", type=int, default=3, help="kill/recover cycles per board")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-boards-") as tmp, \
            TrackerProcess.start(log_path=Path(tmp) / "tracker.log") as tracker, \
            virtual_boards(args.boards, Path(tmp) / "boards") as boards:
        ctl = BoardController([b.settings() for b in boards], tracker.host, tracker.port)
        names = [b.name for b in boards]
        try:
            connect = [_times_ms(lambda n=name: ctl.ssh(n).unreachable_reason(), 1)[0]
                       for name in names]
            print(_line("first SSH connection", connect))
            print(_line(f"discover() of {args.boards} boards",
                        _times_ms(ctl.discover, args.reads)))
            one = names[0]
            print(_line("facts()", _times_ms(lambda: ctl.facts(one), args.reads)))
            print(_line("read_health()", _times_ms(
                lambda: ctl.read_health(one, datetime.now(UTC)), args.reads)))
            print(_line("gating_reading()", _times_ms(
                lambda: ctl.gating_reading(one, datetime.now(UTC)), args.reads)))
            key = ctl.tracker_key(one)

            def registered() -> bool:
                return key in {s.key for s in summary(tracker.host, tracker.port).servers}

            ctl.start_server(one)
            wait_until(registered, 120, "registered")
            recover = []
            for _ in range(args.restarts):
                boards[0].kill_server()
                wait_until(lambda: not registered(), 120, "unregistered")
                start = time.perf_counter()
                ctl.recovery_steps(one)[0].run()
                wait_until(registered, 120, "registered again")
                recover.append((time.perf_counter() - start) * 1000)
            print(_line("restart_app -> registered", recover))
        finally:
            for name in names:
                ctl.stop_server(name)
            ctl.close()
    print("reproduce: python bench/bench_boards.py " + " ".join(sys.argv[1:] if argv is None
                                                                else argv))
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
