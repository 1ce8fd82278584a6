"""Farm's overhead: the same GEMM through farm's queue vs a hand-written tracker script.

::

    python bench/bench_overhead.py                   # GEMM 512, 3 runs each way
    python bench/bench_overhead.py --n 256 --runs 5

One virtual phone, provisioned by farmd (in-process, :func:`farm.cli.demo.demo_farmd`).
Both ways run the same kernel (farm's CPU schedule of ``C = A @ B``, float32,
``time_evaluator`` number=10 repeat=3) on the same phone through the same tracker:

* **farm**: ``Store.enqueue`` of a ``gemm`` job for that phone, until the job
  is ``succeeded``: dispatcher tick (every 2 s), a child process, thermal
  gating (a health read), the compile cache, session, check against numpy,
  result and samples committed. Each run goes twice through farm: with the
  child started cold (``python -m farm.runner.child``, before) and forked warm
  by the zygote (``[jobs] warm_children``, after), switched on the live
  dispatcher (``Dispatcher.warm``).
* **script**: what a seed user writes (``python -c``, below): import TVM, build,
  ``rpc.connect_tracker(...).request(key)``, upload, run, ``time_evaluator``.
  It compiles every time, as such scripts do; farm compiles once per target
  (its first run is dropped as warm-up so both are compared warm-vs-as-usual).

Printed: median wall time each way and the ratios farm (cold, warm) /
script, each attempt's own duration (claim to result, from the store) cold vs
warm, and the GFLOPS each measured (the kernel's speed must not depend on who
asked). Then the child start latency alone, cold vs warm: a new Python that
imports what an attempt imports (:data:`farm.runner.zygote.PRELOAD`) and exits,
against a child forked by the zygote that exits at once (median of
``--starts``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from farm import composition, logs
from farm.cli.demo import demo_farmd
from farm.clock import wait_until
from farm.daemon import Farmd
from farm.queue.models import DeviceState, JobState
from farm.runner.warm import Zygote

READY_DEADLINE_S = 120.0
JOB_DEADLINE_S = 300.0

#: The hand-written script: argv = host port key n. Prints "<wall_s> <gflops>".
SCRIPT = r'''
import sys, time
t0 = time.monotonic()
import numpy as np, tvm
from tvm import rpc
from farm.jobs.gemm import gemm_module, schedule_cpu
host, port, key, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
mod = schedule_cpu(gemm_module(n, "float32"), 32)
lib = tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"}))
lib.export_library("/tmp/farm-bench-overhead-%d.so" % n)
remote = rpc.connect_tracker(host, port).request(key, session_timeout=60)
remote.upload("/tmp/farm-bench-overhead-%d.so" % n, "gemm.so")
f = remote.load_module("gemm.so")
dev = remote.cpu(0)
a = tvm.runtime.tensor(np.random.rand(n, n).astype("float32"), dev)
b = tvm.runtime.tensor(np.random.rand(n, n).astype("float32"), dev)
c = tvm.runtime.tensor(np.zeros((n, n), "float32"), dev)
f["gemm"](a, b, c)
np.testing.assert_allclose(c.numpy(), a.numpy() @ b.numpy(), rtol=1e-3, atol=1e-3)
mean_s = f.time_evaluator("gemm", dev, number=10, repeat=3)(a, b, c).mean
print(time.monotonic() - t0, 2 * n**3 / mean_s / 1e9)
'''


def farm_run(farmd: Farmd, serial: str, n: int, *, warm: bool) -> tuple[float, float, float]:
    """One GEMM through farm's queue; returns (wall s, attempt s, GFLOPS).

    Raises:
        RuntimeError: the job did not succeed.
    """
    store = farmd.store
    farmd.dispatcher.warm = warm
    start = time.monotonic()
    job_id = store.enqueue({"kind": "gemm", "params": {"n": n},
                            "devices": {"serials": [serial]}}, datetime.now(UTC))
    wait_until(lambda: store.get_job(job_id).state not in (JobState.QUEUED, JobState.RUNNING),
               JOB_DEADLINE_S, interval_s=0.05)
    elapsed_s = time.monotonic() - start
    job = store.get_job(job_id)
    if job.state is not JobState.SUCCEEDED:
        raise RuntimeError(f"farm job {job_id} {job.state.value}: {job.error}")
    [attempt] = store.attempts(job_id)
    attempt_s = (attempt.finished_at - attempt.started_at).total_seconds()
    # Let the phone come back to ready before anyone asks for it again.
    wait_until(lambda: store.get_device(serial).state is DeviceState.READY, 30, interval_s=0.05)
    return elapsed_s, attempt_s, store.results(job_id)[0].summary["gflops"]


def start_latency(zygote: Zygote, tmp: Path, starts: int) -> tuple[float, float]:
    """Median seconds to start a child with the job code imported and end it: (cold, warm)."""
    cold_s, warm_s = [], []
    preload = "from farm.runner.zygote import preload; preload()"
    missing = ["--settings", str(tmp / "missing.json"), "--job", "0", "--attempt", "0"]
    for _ in range(starts):
        start = time.monotonic()
        subprocess.run([sys.executable, "-c", preload], check=True)
        cold_s.append(time.monotonic() - start)
        start = time.monotonic()
        zygote.fork(missing, tmp, tmp / "latency.log").wait()
        warm_s.append(time.monotonic() - start)
    return statistics.median(cold_s), statistics.median(warm_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--starts", type=int, default=5, help="child starts timed each way")
    args = parser.parse_args()
    logs.configure(level="warning", stream=sys.stderr)
    farm_s: dict[bool, list[float]] = {False: [], True: []}
    attempt_s: dict[bool, list[float]] = {False: [], True: []}
    farm_gflops, script_s, script_gflops = [], [], []
    with (
        tempfile.TemporaryDirectory(prefix="farm-bench-") as tmp,
        demo_farmd(1, Path(tmp)) as farmd,
    ):
        serial = farmd.fleet.serials[0]
        store = farmd.store
        if not wait_until(lambda: getattr(store.get_device(serial), "state", None)
                          is DeviceState.READY, READY_DEADLINE_S, interval_s=0.2):
            print("phone not ready", file=sys.stderr)
            return 1
        dispatcher = farmd.dispatcher
        zygote = wait_until(lambda: dispatcher.zygotes and dispatcher.zygotes.ready_zygote(),
                            READY_DEADLINE_S, interval_s=0.2)
        if not zygote:
            print("the zygote is not ready ([jobs] warm_children off?)", file=sys.stderr)
            return 1
        key = farmd.manager.runtime(serial).key
        host, port = farmd.tracker_addr
        for run in range(args.runs + 1):  # run 0 warms farm's compile cache
            try:
                cold = farm_run(farmd, serial, args.n, warm=False)
                warm = farm_run(farmd, serial, args.n, warm=True)
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
                return 1
            out = subprocess.run(
                [sys.executable, "-c", SCRIPT, host, str(port), key, str(args.n)],
                capture_output=True,
                text=True,
                timeout=JOB_DEADLINE_S,
                check=False,
            )
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            wall_s, gflops = (float(v) for v in out.stdout.split()[-2:])
            label = "warm-up" if run == 0 else f"run {run}"
            print(
                f"{label}: farm cold {cold[0]:.2f} s (attempt {cold[1]:.2f} s, {cold[2]:.2f}"
                f" GFLOPS), farm warm {warm[0]:.2f} s (attempt {warm[1]:.2f} s, {warm[2]:.2f}"
                f" GFLOPS), script {wall_s:.2f} s ({gflops:.2f} GFLOPS)",
                flush=True,
            )
            if run:
                for is_warm, measured in ((False, cold), (True, warm)):
                    farm_s[is_warm].append(measured[0])
                    attempt_s[is_warm].append(measured[1])
                    farm_gflops.append(measured[2])
                script_s.append(wall_s)
                script_gflops.append(gflops)
        cold_start_s, warm_start_s = start_latency(zygote, Path(tmp), args.starts)
    fc, fw = statistics.median(farm_s[False]), statistics.median(farm_s[True])
    ac, aw = statistics.median(attempt_s[False]), statistics.median(attempt_s[True])
    s = statistics.median(script_s)
    print(f"\nGEMM {args.n} on one virtual phone, median of {args.runs}:")
    print(f"  farm queue, cold child (before):  {fc:.2f} s (attempt {ac:.2f} s)")
    print(f"  farm queue, warm child (after):   {fw:.2f} s (attempt {aw:.2f} s)")
    print(f"  hand-written tracker script:      {s:.2f} s")
    print(f"  wall time ratio farm / script: cold {fc / s:.2f}, warm {fw / s:.2f} (goal <= 1.05)")
    print(f"  GFLOPS farm {statistics.median(farm_gflops):.2f}, script "
          f"{statistics.median(script_gflops):.2f}: ratio "
          f"{statistics.median(farm_gflops) / statistics.median(script_gflops):.2f}")
    print(f"child start (job code imported, then exit), median of {args.starts}: "
          f"cold {cold_start_s * 1000:.0f} ms, warm {warm_start_s * 1000:.0f} ms "
          f"(x{cold_start_s / warm_start_s:.0f})")
    print(f"reproduce: python bench/bench_overhead.py --n {args.n} --runs {args.runs} "
          f"--starts {args.starts}")
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
