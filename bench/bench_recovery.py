"""Recovery time: the TVM RPC app killed -> registered at the tracker again, p50/p95.

::

    python bench/bench_recovery.py                   # 20 kills over 4 phones, sweep every 2 s
    python bench/bench_recovery.py --kills 40 --phones 8 --interval-s 5

farmd (in-process, :func:`farm.cli.demo.demo_farmd`) runs ``--phones`` virtual
usb-only phones on a private adb server; each phone is provisioned and ready.
Then, one kill at a time, round-robin over the phones, the app's process is
crashed through the phone (``Fleet.crash_app``, as a ``FATAL EXCEPTION``
does) and the clock runs until the tracker lists the phone's key again and
the phone is ``ready``. Nothing but farmd acts: its health sweep (every
``--interval-s``) notices the app gone and the recovery ladder restarts it.

So a recovery is: wait for the next sweep (0..interval) + the ladder's step
(``am start``, the RPC server process starting, tracker registration). With
farmd's default ``health.interval_s = 30`` add on average 15 s. Quarantine is
set out of reach (``supervise.quarantine_after = 1000``): every phone is
killed several times within the window, which farmd would otherwise treat as
a crash loop.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--phones", type=int, default=4)
    parser.add_argument("--interval-s", type=float, default=2.0, help="health sweep interval")
    args = parser.parse_args()
    logs.configure(level="warning", stream=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp, demo_farmd(
        args.phones, Path(tmp), health={"interval_s": args.interval_s},
        supervise={"quarantine_after": 1000},
    ) as farmd:
        serials = farmd.fleet.serials
        tracker = farmd.tracker_addr
        keys = {s: farmd.manager.runtime(s).key for s in serials}

        def state(serial: str) -> DeviceState | None:
            return getattr(farmd.store.get_device(serial), "state", None)

        def listed() -> set[str]:
            return {s.key for s in summary(*tracker).servers}

        if not wait_until(lambda: all(state(s) is DeviceState.READY for s in serials),
                          READY_DEADLINE_S, interval_s=0.2):
            print(f"phones not ready in {READY_DEADLINE_S:g} s", file=sys.stderr)
            return 1
        times_s = []
        for kill in range(args.kills):
            serial = serials[kill % len(serials)]
            start = time.monotonic()
            farmd.fleet.crash_app(serial)
            key = keys[serial]
            if not wait_until(lambda k=key: k not in listed(), CRASH_SEEN_DEADLINE_S,
                              interval_s=0.05):
                print(f"kill {kill}: {serial} still listed at the tracker "
                      f"{CRASH_SEEN_DEADLINE_S:g} s after the crash", file=sys.stderr)
                return 1
            back = wait_until(lambda s=serial, k=key: k in listed()
                              and state(s) is DeviceState.READY, RECOVERY_DEADLINE_S,
                              interval_s=0.1)
            if not back:
                print(
                    f"kill {kill}: {serial} not back in {RECOVERY_DEADLINE_S:g} s"
                    f" ({state(serial)})",
                    file=sys.stderr,
                )
                return 1
            times_s.append(time.monotonic() - start)
            print(
                f"kill {kill + 1:2d}/{args.kills} {serial}: back in {times_s[-1]:.2f} s", flush=True
            )
    print(
        f"\nrecovery (app killed -> registered again), {args.kills} kills on {args.phones} "
        f"virtual phones, health sweep every {args.interval_s:g} s:"
    )
    print(
        f"  p50 {percentile(times_s, 50):.2f} s   p95 {percentile(times_s, 95):.2f} s   "
        f"min {min(times_s):.2f} s   max {max(times_s):.2f} s"
        f"   mean {statistics.fmean(times_s):.2f} s"
    )
    print(
        f"reproduce: python bench/bench_recovery.py --kills {args.kills} --phones {args.phones} "
        f"--interval-s {args.interval_s:g}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
