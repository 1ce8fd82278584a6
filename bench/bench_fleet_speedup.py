"""Fleet speed-up: 64 short GEMM jobs on 8 phones vs on 1 phone.

::

    python bench/bench_fleet_speedup.py              # 64 jobs, 8 phones
    python bench/bench_fleet_speedup.py --jobs 16 --phones 4

farmd (in-process, :func:`farm.cli.demo.demo_farmd`) provisions ``--phones``
virtual phones. First all jobs are queued pinned to one phone
(``devices.serials``) and timed until the last one succeeded; then the same
jobs are queued for any phone. Speed-up = time on 1 phone / time on N.

Each job is short (GEMM 64, number=1, repeat=1) so the figure shows farm's
own parallelism: the dispatcher's tick, one child process per attempt,
thermal gating and the commit. On a real fleet each phone computes on its own
silicon; here every virtual phone's RPC server and every child share the
host's cores, so the speed-up is bounded by the host (about 2 on 2 cores),
not by farm. The compile cache is warmed by one job before timing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from farm import composition, logs
from farm.cli.demo import demo_farmd
from farm.clock import wait_until
from farm.queue import Store
from farm.queue.models import DeviceState, JobState

READY_DEADLINE_S = 240.0
BATCH_DEADLINE_S = 1800.0
_DONE = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


def _spec(serials: list[str] | None) -> dict:
    spec = {"kind": "gemm", "params": {"n": 64, "number": 1, "repeat": 1}, "attempts": 1}
    if serials:
        spec["devices"] = {"serials": serials}
    return spec


def _run_batch(store: Store, count: int, serials: list[str] | None) -> float:
    start = time.monotonic()
    now = datetime.now(UTC)
    ids = [store.enqueue(_spec(serials), now) for _ in range(count)]
    ok = wait_until(lambda: all(store.get_job(i).state in _DONE for i in ids),
                    BATCH_DEADLINE_S, interval_s=0.1)
    elapsed_s = time.monotonic() - start
    failed = [i for i in ids if store.get_job(i).state is not JobState.SUCCEEDED]
    if not ok or failed:
        raise SystemExit(f"batch did not succeed: {len(failed)} of {count} jobs not succeeded")
    return elapsed_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--phones", type=int, default=8)
    args = parser.parse_args()
    logs.configure(level="warning", stream=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp, demo_farmd(
        args.phones, Path(tmp)) as farmd:
        store, serials = farmd.store, farmd.fleet.serials
        if not wait_until(lambda: all(getattr(store.get_device(s), "state", None)
                                      is DeviceState.READY for s in serials),
                          READY_DEADLINE_S, interval_s=0.5):
            print("phones not ready", file=sys.stderr)
            return 1
        _run_batch(store, 1, serials[:1])  # warm the compile cache
        one_s = _run_batch(store, args.jobs, serials[:1])
        print(f"{args.jobs} jobs on 1 phone: {one_s:.1f} s", flush=True)
        many_s = _run_batch(store, args.jobs, None)
        print(f"{args.jobs} jobs on {args.phones} phones: {many_s:.1f} s", flush=True)
    print(f"\nfleet speed-up, {args.jobs} short GEMM jobs: {one_s:.1f} s on 1 phone, "
          f"{many_s:.1f} s on {args.phones} phones: x{one_s / many_s:.2f} "
          f"(host has {os.cpu_count()} cores shared by every virtual phone)")
    print(
        f"reproduce: python bench/bench_fleet_speedup.py --jobs {args.jobs} --phones {args.phones}"
    )
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
