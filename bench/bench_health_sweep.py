"""One health sweep's wall time for 16 phones.

::

    python bench/bench_health_sweep.py               # 16 phones, 5 sweeps
    python bench/bench_health_sweep.py --phones 8 --sweeps 10

farmd (in-process, :func:`farm.cli.demo.demo_farmd`) provisions ``--phones``
virtual usb-only phones to ``ready``; its own periodic sweep is pushed out of
the way (``health.interval_s = 3600``) and this script calls
``FleetManager.sweep()`` itself, the exact function farmd's scheduler runs:
one tracker summary, then per phone in parallel (a pool sized to the phones) the
battery, thermal, storage, screen, process and logcat probes through the real
adb server, a stored health sample and a verdict.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from farm import composition, logs
from farm.cli.demo import demo_farmd
from farm.clock import wait_until
from farm.queue.models import DeviceState

READY_DEADLINE_S = 300.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=16)
    parser.add_argument("--sweeps", type=int, default=5)
    args = parser.parse_args()
    logs.configure(level="warning", stream=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp, demo_farmd(
        args.phones, Path(tmp), health={"interval_s": 3600},
    ) as farmd:
        serials = farmd.fleet.serials
        start = time.monotonic()
        ready = wait_until(lambda: all(
            getattr(farmd.store.get_device(s), "state", None) is DeviceState.READY
            for s in serials), READY_DEADLINE_S, interval_s=0.5)
        if not ready:
            print(f"phones not ready in {READY_DEADLINE_S:g} s", file=sys.stderr)
            return 1
        print(f"{args.phones} phones ready in {time.monotonic() - start:.1f} s", flush=True)
        times_s = []
        for _ in range(args.sweeps):
            start = time.monotonic()
            swept = farmd.manager.sweep()
            times_s.append(time.monotonic() - start)
            assert swept == args.phones, swept
            print(f"sweep of {swept} phones: {times_s[-1]:.2f} s", flush=True)
    print(
        f"\nhealth sweep, {args.phones} virtual phones: median {statistics.median(times_s):.2f} s, "
        f"min {min(times_s):.2f} s, max {max(times_s):.2f} s over {args.sweeps} sweeps"
    )
    print(
        f"reproduce: python bench/bench_health_sweep.py --phones {args.phones}"
        f" --sweeps {args.sweeps}"
    )
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
