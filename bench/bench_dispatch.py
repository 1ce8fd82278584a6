"""Dispatch latency: from an idle ready phone and a queued job to a running child.

::

    python bench/bench_dispatch.py                 # 16 phones, 1000 queued, 160 measured
    python bench/bench_dispatch.py --phones 4 --jobs 100 --measure 100

The 16 "phones" are ready device rows in a real SQLite store under a temporary
folder; 1000 gemm jobs are queued before the dispatcher starts. The dispatcher
is the real one (reap, snapshot, plan, claim, spawn, heartbeat, collect),
ticking as fast as it can; only its child command is replaced by this script's
``--child`` mode, which stores a one-sample result through ``Store.finish`` and
leaves ``outcome.json`` exactly as ``farm.runner.child`` does, without
compiling anything. For each attempt the phone was idle and ready from
``ready`` (the start for the first wave, else the end of the phone's previous
attempt, when its result was committed) and::

    ready -> running = child spawned - max(ready, job submitted)

which includes noticing the previous child's exit, reap, snapshot, plan, the
atomic claim and the spawn. The duration of each tick that started children
(reap + snapshot of 1000 queued jobs + plan + claim + spawn) is printed too.
Children take seconds here (a Python start importing farm, 16 at once on the
host's cores), which sets the drain rate; so the run stops after ``--measure``
attempts (160 by default), with the queue still 800+ deep, instead of draining
all 1000 jobs. Running children are killed and their jobs requeued at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from _stats import percentile

from farm import composition
from farm.clock import SystemClock
from farm.config import Settings
from farm.queue import DeviceState, Outcome, Store
from farm.queue.records import Claim
from farm.runner import Dispatcher
from farm.runner.outcome import ChildOutcome, write_outcome


def child(settings_path: Path, attempt_id: int, run_dir: Path) -> int:
    """The stand-in child: commit a one-sample result, leave outcome.json."""
    settings = Settings.model_validate_json(settings_path.read_text())
    with Store(settings.database_url) as store:
        stored = store.finish(attempt_id, Outcome({"kind": "gemm", "bench": True}, [1e-3]),
                              SystemClock().now())
    write_outcome(run_dir, ChildOutcome("succeeded", True, "stored" if stored else "not_stored"))
    return 0


def bench_command(claim: Claim, run_dir: Path, settings_path: Path) -> list[str]:
    """argv of this script's child mode."""
    return [
        sys.executable,
        __file__,
        "--child",
        str(settings_path),
        str(claim.attempt.id),
        str(run_dir),
    ]


def run(phones: int, jobs: int, measure: int, data_dir: Path) -> None:
    """Queue ``jobs`` jobs for ``phones`` ready phones, drain them, print the figures."""
    clock = SystemClock()
    settings = Settings(data_dir=data_dir)
    store = Store(settings.database_url)
    now = clock.now()
    serials = [f"bench-{i:02d}" for i in range(phones)]
    for serial in serials:
        store.upsert_device(serial, now, {"abi": "x86_64", "host_runtime": True})
        store.move_device(serial, DeviceState.READY, "bench", now,
                          expect_state=DeviceState.DISCOVERED)
    for _ in range(jobs):
        store.enqueue({"kind": "gemm", "params": {"n": 16}}, clock.now())
    dispatcher = Dispatcher(store, settings, clock, command=bench_command)
    wall0, mono0 = clock.now(), clock.monotonic()
    spawned: dict[int, datetime] = {}
    deadline_s = mono0 + 60 + jobs * 2.0
    tick_ms: list[float] = []
    while clock.monotonic() < deadline_s:
        tick_start_s = clock.monotonic()
        report = dispatcher.tick()
        if report.started:
            tick_ms.append((clock.monotonic() - tick_start_s) * 1e3)
        for attempt_id, running in dispatcher.children.items():
            spawned.setdefault(attempt_id, wall0 + timedelta(seconds=running.started_s - mono0))
        if len(spawned) - len(dispatcher.children) >= measure:
            break
        time.sleep(0.005)  # the daemon ticks on events; here: poll child exits often
    drain_s = clock.monotonic() - mono0
    dispatcher.stop(deadline_s=0)
    running_ms: list[float] = []
    last_end: dict[str, datetime] = {}
    attempts = sorted((a for j in store.list_jobs(limit=jobs + 1) for a in store.attempts(j.id)),
                      key=lambda a: a.started_at)
    for attempt in attempts:
        job = store.get_job(attempt.job_id)
        serial = attempt.serials[0]
        ready = max(last_end.get(serial, wall0), job.submitted_at)  # type: ignore[union-attr]
        if attempt.id in spawned and attempt.finished_at is not None:
            running_ms.append((spawned[attempt.id] - ready).total_seconds() * 1e3)
        if attempt.finished_at is not None:
            last_end[serial] = attempt.finished_at
    results = sum(1 for j in store.list_jobs(limit=jobs + 1) if store.count_results(j.id) == 1)
    store.close()
    print(
        f"command: python bench/bench_dispatch.py --phones {phones} --jobs {jobs}"
        f" --measure {measure}"
    )
    print(
        f"phones {phones}, jobs queued {jobs}, attempts {len(attempts)}, results {results}, "
        f"in {drain_s:.1f} s ({results / drain_s:.2f} jobs/s)"
    )
    for name, values in (
        ("ready -> child running", running_ms),
        ("tick that started work", tick_ms),
    ):
        if values:
            print(
                f"{name:24s} p50 {percentile(values, 50):8.1f} ms"
                f"   p99 {percentile(values, 99):8.1f} ms"
                f"   mean {statistics.fmean(values):8.1f} ms   n {len(values)}"
            )


def main() -> int:
    """Command line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument(
        "--measure", type=int, default=160, help="stop after this many attempts ended"
    )
    parser.add_argument(
        "--child", nargs=3, metavar=("SETTINGS", "ATTEMPT", "RUN_DIR"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        return child(Path(args.child[0]), int(args.child[1]), Path(args.child[2]))
    with tempfile.TemporaryDirectory(prefix="farm-bench-dispatch-") as tmp:
        run(args.phones, args.jobs, args.measure, Path(tmp))
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
