"""Recovery time: the TVM RPC app killed -> registered at the tracker again, p50/p95.

::

    python bench/bench_recovery.py                   # 10 kills over 4 phones, each way
    python bench/bench_recovery.py --kills 20 --phones 8 --interval-s 30

Measured twice in one run, each on a fresh in-process farmd
(:func:`farm.cli.demo.demo_farmd`) with ``--phones`` virtual usb-only phones on
a private adb server and the health sweep every ``--interval-s`` (farmd's
default, 30 s):

- **sweep only** (``health.watch_app_events = false``, farm before the app
  watch): the next health sweep notices the app gone, 0..interval after the
  kill, and the recovery ladder restarts it;
- **app watch** (the default): farmd follows each phone's ``logcat -b events``
  and starts the ladder on the app's ``am_crash``/``am_proc_died``.

One kill at a time, round-robin over the phones: the app is crashed through
the phone (``Fleet.crash_app``, as a ``FATAL EXCEPTION`` does) and the clock
runs until the tracker lists the phone's key again and the phone is
``ready``. Also printed: the time from the kill to the ladder's recorded
failure (the ``recovery: failure (...)`` event row), i.e. how long farmd took
to notice. Restarting takes at least the stock app's own 5 s
(``HANDLER_RESTART_DELAY`` in apache/tvm ``apps/android_rpc``
``MainActivity.java``, which the virtual app keeps) plus the RPC server's start
and registration. Quarantine is set out of reach
(``supervise.quarantine_after = 1000``): every phone is killed several times
within the window, which farmd would otherwise treat as a crash loop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from _stats import percentile

from farm import logs
from farm.cli.demo import demo_farmd
from farm.clock import wait_until
from farm.queue.models import DeviceState
from farm.tvm.tracker import summary

READY_DEADLINE_S = 150.0
RECOVERY_DEADLINE_S = 120.0
CRASH_SEEN_DEADLINE_S = 20.0


class BenchError(Exception):
    """A kill did not go as the bench needs; the message says which."""


def measure(kills: int, phones: int, interval_s: float, *, watch: bool) -> tuple[
        list[float], list[float]]:
    """Kill and wait ``kills`` times on a fresh farmd; returns (back_s, noticed_s) per kill.

    Raises:
        BenchError: phones not ready, a crash not seen, or a phone not back in time.
    """
    label = "app watch" if watch else "sweep only"
    with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp, demo_farmd(
        phones, Path(tmp), health={"interval_s": interval_s, "watch_app_events": watch},
        supervise={"quarantine_after": 1000},
    ) as farmd:
        serials = farmd.fleet.serials
        tracker = farmd.tracker_addr
        keys = {s: farmd.manager.runtime(s).key for s in serials}

        def state(serial: str) -> DeviceState | None:
            return getattr(farmd.store.get_device(serial), "state", None)

        def listed() -> set[str]:
            return {s.key for s in summary(*tracker).servers}

        def noticed_at(serial: str, since: datetime) -> datetime | None:
            return next((e.at for e in farmd.store.device_events(serial, limit=50)
                         if e.reason.startswith("recovery: failure") and e.at >= since), None)

        if not wait_until(lambda: all(state(s) is DeviceState.READY for s in serials),
                          READY_DEADLINE_S, interval_s=0.2):
            raise BenchError(f"phones not ready in {READY_DEADLINE_S:g} s")
        back_s: list[float] = []
        noticed_s: list[float] = []
        for kill in range(kills):
            serial = serials[kill % len(serials)]
            key = keys[serial]
            start, wall = time.monotonic(), datetime.now(UTC)
            farmd.fleet.crash_app(serial)
            if not wait_until(lambda k=key: k not in listed(), CRASH_SEEN_DEADLINE_S,
                              interval_s=0.05):
                raise BenchError(f"kill {kill}: {serial} still listed at the tracker "
                                 f"{CRASH_SEEN_DEADLINE_S:g} s after the crash")
            back = wait_until(lambda s=serial, k=key: k in listed()
                              and state(s) is DeviceState.READY, RECOVERY_DEADLINE_S,
                              interval_s=0.1)
            if not back:
                raise BenchError(f"kill {kill}: {serial} not back in {RECOVERY_DEADLINE_S:g} s"
                                 f" ({state(serial)})")
            back_s.append(time.monotonic() - start)
            at = noticed_at(serial, wall)
            if at is not None:
                noticed_s.append((at - wall).total_seconds())
            print(f"{label}: kill {kill + 1:2d}/{kills} {serial}: back in {back_s[-1]:.2f} s",
                  flush=True)
    return back_s, noticed_s


def figures(values: Sequence[float]) -> str:
    """``p50 .. p95 .. min .. max .. mean`` of seconds."""
    return (f"p50 {percentile(values, 50):6.2f} s   p95 {percentile(values, 95):6.2f} s   "
            f"min {min(values):.2f}   max {max(values):.2f}   mean {statistics.fmean(values):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10, help="kills in each of the two runs")
    parser.add_argument("--phones", type=int, default=4)
    parser.add_argument("--interval-s", type=float, default=30.0, help="health sweep interval")
    args = parser.parse_args()
    logs.configure(level="warning", stream=sys.stderr)
    results = {}
    try:
        for watch in (False, True):
            results[watch] = measure(args.kills, args.phones, args.interval_s, watch=watch)
    except BenchError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"\nrecovery, {args.kills} kills on {args.phones} virtual phones each way, "
          f"health sweep every {args.interval_s:g} s:")
    for watch, label in ((False, "sweep only"), (True, "app watch ")):
        back_s, noticed_s = results[watch]
        print(f"  {label}  killed -> registered again  {figures(back_s)}")
        if noticed_s:
            print(f"  {label}  killed -> noticed           {figures(noticed_s)}")
    old, new = percentile(results[False][0], 95), percentile(results[True][0], 95)
    print(f"  p95 app watch / sweep only: {new / old:.2f}")
    print(f"reproduce: python bench/bench_recovery.py --kills {args.kills} "
          f"--phones {args.phones} --interval-s {args.interval_s:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
