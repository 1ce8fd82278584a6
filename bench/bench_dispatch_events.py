"""Event-driven dispatch against the old periodic tick, side by side in one run.

::

    python bench/bench_dispatch_events.py          # 16 phones/1000 queued; 8 phones busy share
    python bench/bench_dispatch_events.py --measure 64 --busy-jobs 48 --enqueues 10

Each figure is measured twice, with farmd's dispatch as configured by
``jobs.wake_on_events``: ``tick`` (false: the dispatcher runs every
``jobs.tick_interval_s`` = 2 s, as before) and ``wake`` (true: it also runs
at once when a child exits and when ``farmctl enqueue`` sends its wake). The
dispatcher, its :class:`~farm.runner.wake.TickLoop` and the wake socket are
farmd's own; the "phones" are ready device rows in a real SQLite store, and
each attempt's child is this script's ``--child`` mode: a real Python process
that opens the store, holds the phone for ``--work-s`` seconds (the job's
work) and commits a one-sample result through ``Store.finish``, leaving
``outcome.json`` as ``farm.runner.child`` does. Figures:

1. **ready -> running**, 16 phones, 1000 jobs queued before the dispatcher
   starts: for each attempt, its child's spawn minus the moment it could
   have started, ``max(job submitted, the phone's previous result committed)``.
   Stops after ``--measure`` attempts ended (the queue stays 800+ deep).
2. **busy share**, 8 phones under a backlog of ``--busy-jobs`` short jobs: the
   time phones spent inside attempts (claim to result) over 8 x the wall time
   from the first claim to the last result.
3. **enqueue -> running**, one idle phone: ``--enqueues`` jobs queued one at
   a time as ``farmctl enqueue`` does (commit, then the wake datagram), each
   after the previous finished; spawn minus submit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from _standin import standin_argv, standin_child
from _stats import percentile

from farm import composition, logs
from farm.clock import SystemClock, wait_until
from farm.config import Settings
from farm.queue import DeviceState, Store
from farm.queue.records import AttemptView, Claim
from farm.runner import Dispatcher
from farm.runner.wake import SocketWake, TickLoop, send_wake

TICK_S = 2.0  # the config's default jobs.tick_interval_s
GEMM = {"kind": "gemm", "params": {"n": 16}}
MODES = ("tick", "wake")


@dataclass
class Farm:
    """A store with ready phones, a dispatcher ticking as farmd's does, and its wake socket."""

    store: Store
    loop: TickLoop
    dispatcher: Dispatcher
    spawned: dict[int, datetime]
    data_dir: Path
    stops: list[Callable[[], object]]
    tick_ms: list[float]

    def close(self) -> None:
        """Stop ticking, kill running children (their jobs are requeued), close."""
        for stop in reversed(self.stops):
            stop()
        self.dispatcher.stop(deadline_s=0)
        self.store.close()


def start_farm(mode: str, phones: int, backlog: int, work_s: float, data_dir: Path) -> Farm:
    """Ready phones, ``backlog`` queued jobs, and a dispatcher ticking in ``mode``."""
    clock = SystemClock()
    wake = mode == "wake"
    settings = Settings.model_validate({
        "data_dir": str(data_dir),
        "jobs": {"tick_interval_s": TICK_S, "wake_on_events": wake},
    })
    store = Store(settings.database_url)
    now = clock.now()
    for i in range(phones):
        serial = f"bench-{i:02d}"
        store.upsert_device(serial, now, {"abi": "x86_64", "host_runtime": True})
        store.move_device(serial, DeviceState.READY, "bench", now,
                          expect_state=DeviceState.DISCOVERED)
    for _ in range(backlog):
        store.enqueue(GEMM, clock.now())
    spawned: dict[int, datetime] = {}

    def command(claim: Claim, run_dir: Path, settings_path: Path) -> list[str]:
        spawned[claim.attempt.id] = clock.now()
        return standin_argv(__file__, settings_path, claim.attempt.id, run_dir, work_s)

    loops: list[TickLoop] = []  # the loop needs the dispatcher, which wakes the loop

    def child_exited() -> None:
        loops[0].wake()

    dispatcher = Dispatcher(store, settings, clock, command=command,
                            on_exit=child_exited if wake else None)
    tick_ms: list[float] = []

    def tick() -> None:
        start_s = time.perf_counter()
        if dispatcher.tick().started:
            tick_ms.append((time.perf_counter() - start_s) * 1e3)

    loop = TickLoop(tick, settings.jobs.tick_interval_s, name=f"bench-{mode}")
    loops.append(loop)
    stops: list[Callable[[], object]] = []
    loop.start()
    stops.append(loop.stop)
    if wake:
        stops.append(SocketWake(data_dir, loop.wake).close)
    return Farm(store, loop, dispatcher, spawned, data_dir, stops, tick_ms)


def ended_attempts(store: Store) -> list[AttemptView]:
    """Every attempt with a result, by start."""
    attempts = [a for j in store.list_jobs(limit=100_000) for a in store.attempts(j.id)]
    return sorted((a for a in attempts if a.finished_at is not None), key=lambda a: a.started_at)


def ready_to_running(mode: str, phones: int, jobs: int, measure: int, work_s: float,
                     data_dir: Path) -> tuple[list[float], list[float], list[float]]:
    """Figure 1 (ms): every attempt, those after the first wave, and the ticks that started work."""
    farm = start_farm(mode, phones, jobs, work_s, data_dir)
    start = SystemClock().now()
    try:
        wait_until(lambda: len(ended_attempts(farm.store)) >= measure, 60 + measure * 5.0,
                   f"{measure} attempts ended", interval_s=0.25)
        attempts = ended_attempts(farm.store)
        submitted = {j.id: j.submitted_at for j in farm.store.list_jobs(limit=jobs + 1)}
    finally:
        farm.close()
    last_end: dict[str, datetime] = {}
    waits_ms, steady_ms = [], []
    for attempt in attempts:
        serial = attempt.serials[0]
        ready = max(last_end.get(serial, start), submitted[attempt.job_id])
        wait_ms = (farm.spawned[attempt.id] - ready).total_seconds() * 1e3
        waits_ms.append(wait_ms)
        if serial in last_end:
            steady_ms.append(wait_ms)
        last_end[serial] = attempt.finished_at  # type: ignore[assignment]
    return waits_ms, steady_ms, farm.tick_ms


def busy_share(mode: str, phones: int, jobs: int, work_s: float, data_dir: Path) -> float:
    """Figure 2: share of phone time inside attempts while the backlog drains."""
    farm = start_farm(mode, phones, jobs, work_s, data_dir)
    try:
        wait_until(lambda: len(ended_attempts(farm.store)) >= jobs, 60 + jobs * 5.0,
                   f"{jobs} jobs done", interval_s=0.25)
        attempts = ended_attempts(farm.store)
    finally:
        farm.close()
    spans = [(a.started_at, a.finished_at) for a in attempts if a.finished_at is not None]
    first = min(start for start, _ in spans)
    last = max(end for _, end in spans)
    inside_s = sum((end - start).total_seconds() for start, end in spans)
    return inside_s / (phones * (last - first).total_seconds())


def enqueue_to_running(mode: str, enqueues: int, work_s: float, data_dir: Path) -> list[float]:
    """Figure 3, in ms per job."""
    farm = start_farm(mode, 1, 0, work_s, data_dir)
    waits_ms = []
    try:
        wait_until(lambda: farm.loop.ticks >= 1, 30, "the first tick")
        for _ in range(enqueues):
            job_id = farm.store.enqueue(GEMM, SystemClock().now())
            send_wake(data_dir)  # what farmctl enqueue does after the commit
            wait_until(lambda j=job_id: farm.store.get_job(j).state.ended,  # type: ignore[misc,union-attr]
                       60, f"job {job_id} done", interval_s=0.05)
            job = farm.store.get_job(job_id)
            attempt = farm.store.attempts(job_id)[0]
            assert job is not None
            waits_ms.append((farm.spawned[attempt.id] - job.submitted_at).total_seconds() * 1e3)
    finally:
        farm.close()
    return waits_ms


def line(name: str, mode: str, values_ms: list[float]) -> str:
    """One percentile line."""
    return (f"{name:22s} {mode:5s} p50 {percentile(values_ms, 50):8.1f} ms"
            f"   p99 {percentile(values_ms, 99):8.1f} ms"
            f"   mean {statistics.fmean(values_ms):8.1f} ms   n {len(values_ms)}")


def main() -> int:
    """Command line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--measure", type=int, default=96,
                        help="attempts ended before figure 1 stops")
    parser.add_argument("--busy-phones", type=int, default=8)
    parser.add_argument("--busy-jobs", type=int, default=48)
    parser.add_argument("--enqueues", type=int, default=10)
    parser.add_argument("--work-s", type=float, default=2.0,
                        help="seconds each stand-in job holds its phone")
    parser.add_argument("--child", nargs=4, metavar=("SETTINGS", "ATTEMPT", "RUN_DIR", "WORK_S"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    logs.configure(json=True, level="error", stream=sys.stderr)
    if args.child:
        return standin_child(Path(args.child[0]), int(args.child[1]), Path(args.child[2]),
                             float(args.child[3]))
    print(f"command: python bench/bench_dispatch_events.py --phones {args.phones} --jobs "
          f"{args.jobs} --measure {args.measure} --busy-phones {args.busy_phones} --busy-jobs "
          f"{args.busy_jobs} --enqueues {args.enqueues} --work-s {args.work_s:g}")
    print(f"tick: jobs.wake_on_events = false, a tick every {TICK_S:g} s (before); "
          "wake: true (after)")
    print(f"host: {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.1f}")
    ready: dict[str, tuple[list[float], list[float], list[float]]] = {}
    enqueue: dict[str, list[float]] = {}
    busy: dict[str, float] = {}
    for mode in MODES:
        with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp:
            ready[mode] = ready_to_running(mode, args.phones, args.jobs, args.measure,
                                           args.work_s, Path(tmp))
        with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp:
            busy[mode] = busy_share(mode, args.busy_phones, args.busy_jobs, args.work_s,
                                    Path(tmp))
        with tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp:
            enqueue[mode] = enqueue_to_running(mode, args.enqueues, args.work_s, Path(tmp))
    for mode in MODES:
        print(line(f"ready -> running ({args.phones} ph)", mode, ready[mode][0]))
    for mode in MODES:
        print(line("  after the first wave", mode, ready[mode][1]))
    for mode in MODES:
        print(line("  tick that started work", mode, ready[mode][2]))
    for mode in MODES:
        print(line("enqueue -> running", mode, enqueue[mode]))
    for mode in MODES:
        print(f"{'busy share (' + str(args.busy_phones) + ' ph)':22s} {mode:5s} "
              f"{100 * busy[mode]:.1f} % of phone time inside jobs "
              f"({args.busy_jobs} jobs of {args.work_s:g} s)")
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
