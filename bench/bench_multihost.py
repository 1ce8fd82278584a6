"""Dispatch latency across two farmd hosts sharing one PostgreSQL queue.

::

    TEST_POSTGRES_URL=postgresql+psycopg://farm@127.0.0.1/postgres python bench/bench_multihost.py
    python bench/bench_multihost.py --postgres URL --phones 4 --jobs 80 --interval-s 0.25

Two "hosts" run as two processes of this script (``--host`` mode), each with
farmd's own dispatch: a :class:`~farm.runner.Dispatcher` with its host id,
ticked by a :class:`~farm.runner.wake.TickLoop` every ``jobs.tick_interval_s``
and woken by PostgreSQL ``LISTEN farm_jobs`` (:class:`~farm.runner.wake.PgWake`)
and by its children's exits. Each host owns ``--phones`` ready device rows
(``Store.adopt_device``) and plans over them only (``Store.head(host=...)``).
Each attempt's child is this script's ``--child`` mode: a real process that
holds its phone ``--work-s`` seconds and commits a one-sample result through
``Store.finish``. The main process makes a fresh database, enqueues ``--jobs``
GEMM jobs one every ``--interval-s`` (as many ``farmctl enqueue`` would: the
commit NOTIFYs every host), then a burst of ``--burst`` jobs at once (default:
one per phone of both hosts, so no job waits for a free phone), and reads
from the database, per job, **enqueue -> attempt started**: the attempt's
``started_at`` (its claim's commit) minus the job's ``submitted_at``.

Both hosts share this machine's cores: the figures are what the queue, the
notification and the claims add, not a network's round trips. Each stand-in
child is a cold Python start (about a second of CPU): paced faster than the
cores start them, the figures measure the machine, not the dispatch.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from _standin import standin_argv, standin_child
from _stats import percentile

from farm import composition, logs
from farm.clock import SystemClock, wait_until
from farm.config import Settings
from farm.queue import DeviceState, Store
from farm.queue.records import Claim
from farm.runner import Dispatcher
from farm.runner.wake import PgWake, TickLoop
from farm.testing import fresh_postgres_database

HOSTS = ("bench-a", "bench-b")
GEMM = {"kind": "gemm", "params": {"n": 16}}
DEAD_AFTER_S = 3600.0  # nobody dies here


def host(host_id: str, database_url: str, data_dir: Path, work_s: float) -> int:
    """One host's dispatch until SIGTERM: TickLoop + PgWake + Dispatcher over its own phones."""
    clock = SystemClock()
    settings = Settings.model_validate({
        "data_dir": str(data_dir), "host_id": host_id, "database_url": database_url,
        "jobs": {"warm_children": False},
    })
    store = Store(database_url)
    store.register_host(host_id, "127.0.0.1", 9190, clock.now())

    def command(claim: Claim, run_dir: Path, settings_path: Path) -> list[str]:
        return standin_argv(__file__, settings_path, claim.attempt.id, run_dir, work_s)

    loops: list[TickLoop] = []  # the loop needs the dispatcher, which wakes the loop

    def child_exited() -> None:
        loops[0].wake()

    dispatcher = Dispatcher(store, settings, clock, command=command, on_exit=child_exited)
    loop = TickLoop(dispatcher.tick, settings.jobs.tick_interval_s, name=f"bench-{host_id}")
    loops.append(loop)
    loop.start()
    wake = PgWake(database_url, loop.wake, backoff_base_s=settings.supervise.backoff_base_s,
                  backoff_max_s=settings.supervise.backoff_max_s)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print("ready", flush=True)
    done.wait()
    wake.close()
    loop.stop()
    dispatcher.stop(deadline_s=0)
    dispatcher.close()
    store.close()
    return 0


def start_hosts(url: str, tmp: Path, work_s: float) -> list[subprocess.Popen[bytes]]:
    """Both host processes, each once it listens."""
    procs = []
    for host_id in HOSTS:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--host", host_id, url, str(tmp / host_id), str(work_s)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"host {host_id} did not start")
        procs.append(proc)
    return procs


def measure(store: Store, jobs: int, interval_s: float, burst: int,
            phones: int) -> tuple[list[float], list[float], Counter[str]]:
    """Paced then burst enqueues; (paced ms, burst ms, attempts per host)."""
    clock = SystemClock()
    paced = []
    for _ in range(jobs):
        paced.append(store.enqueue(GEMM, clock.now()))
        time.sleep(interval_s)
    wait_until(lambda: all(store.get_job(j).state.ended for j in paced),  # type: ignore[union-attr]
               60 + jobs * 2.0, "paced jobs ended", interval_s=0.25)
    bursts = [store.enqueue(GEMM, clock.now()) for _ in range(burst)]
    wait_until(lambda: all(store.get_job(j).state.ended for j in bursts),  # type: ignore[union-attr]
               60 + burst * 2.0 / phones, "burst jobs ended", interval_s=0.25)
    per_host: Counter[str] = Counter()

    def latencies(job_ids: list[int]) -> list[float]:
        out = []
        for job_id in job_ids:
            job, [attempt, *_] = store.get_job(job_id), store.attempts(job_id)
            assert job is not None
            per_host[attempt.host or "?"] += 1
            out.append((attempt.started_at - job.submitted_at).total_seconds() * 1e3)
        return out

    return latencies(paced), latencies(bursts), per_host


def line(name: str, values_ms: list[float]) -> str:
    """One percentile line."""
    return (f"{name:34s} p50 {percentile(values_ms, 50):8.1f} ms   "
            f"p99 {percentile(values_ms, 99):8.1f} ms   "
            f"mean {statistics.fmean(values_ms):8.1f} ms   n {len(values_ms)}")


def main() -> int:
    """Command line entry."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=os.environ.get("TEST_POSTGRES_URL"),
                        help="a PostgreSQL URL whose user may CREATE DATABASE "
                             "(default: $TEST_POSTGRES_URL)")
    parser.add_argument("--phones", type=int, default=4, help="ready phones per host")
    parser.add_argument("--jobs", type=int, default=40, help="paced jobs")
    parser.add_argument("--interval-s", type=float, default=1.0,
                        help="seconds between paced enqueues")
    parser.add_argument("--burst", type=int, default=None,
                        help="jobs enqueued at once after (default: every phone of both hosts)")
    parser.add_argument("--work-s", type=float, default=0.5,
                        help="seconds each stand-in job holds its phone")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--host", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    logs.configure(json=True, level="error", stream=sys.stderr)
    if args.child:
        return standin_child(Path(args.child[0]), int(args.child[1]), Path(args.child[2]),
                             float(args.child[3]))
    if args.host:
        return host(args.host[0], args.host[1], Path(args.host[2]), float(args.host[3]))
    if not args.postgres:
        parser.error("give --postgres URL or set TEST_POSTGRES_URL")
    if args.burst is None:
        args.burst = len(HOSTS) * args.phones
    print(f"command: python bench/bench_multihost.py --phones {args.phones} --jobs {args.jobs} "
          f"--interval-s {args.interval_s:g} --burst {args.burst} --work-s {args.work_s:g}")
    print(f"host: {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.1f}; "
          f"2 hosts x {args.phones} phones, one PostgreSQL queue")
    procs: list[subprocess.Popen[bytes]] = []
    with (fresh_postgres_database(args.postgres, "farm_bench_") as url, Store(url) as store,
          tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp):
        try:
            now = SystemClock().now()
            for host_id in HOSTS:
                for i in range(args.phones):
                    serial = f"{host_id}-{i:02d}"
                    store.adopt_device(serial, host_id, now, dead_after_s=DEAD_AFTER_S)
                    store.upsert_device(serial, now, {"abi": "x86_64"})
                    store.move_device(serial, DeviceState.READY, "bench", now,
                                      expect_state=DeviceState.DISCOVERED)
            procs = start_hosts(url, Path(tmp), args.work_s)
            paced, burst, per_host = measure(store, args.jobs, args.interval_s, args.burst,
                                             args.phones)
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
    print(line(f"enqueue -> started, paced ({args.interval_s:g} s)", paced))
    print(line(f"enqueue -> started, burst of {args.burst}", burst))
    print("attempts per host: " + ", ".join(f"{h} {n}" for h, n in sorted(per_host.items())))
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
