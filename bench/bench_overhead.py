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
  result and samples committed.
* **script**: what a seed user writes (``python -c``, below): import TVM, build,
  ``rpc.connect_tracker(...).request(key)``, upload, run, ``time_evaluator``.
  It compiles every time, as such scripts do; farm compiles once per target
  (its first run is dropped as warm-up so both are compared warm-vs-as-usual).

Printed: median wall time each way and their ratio, and the GFLOPS each
measured (the kernel's speed must not depend on who asked).
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

from farm import logs
from farm.cli.demo import demo_farmd
from farm.clock import wait_until
from farm.queue.models import DeviceState, JobState

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    logs.configure(level="warning", stream=sys.stderr)
    farm_s, farm_gflops, script_s, script_gflops = [], [], [], []
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
        key = farmd.manager.runtime(serial).key
        host, port = farmd.tracker_addr
        for run in range(args.runs + 1):  # run 0 warms farm's compile cache
            start = time.monotonic()
            job_id = store.enqueue({"kind": "gemm", "params": {"n": args.n},
                                    "devices": {"serials": [serial]}}, datetime.now(UTC))
            wait_until(lambda i=job_id: store.get_job(i).state not in (JobState.QUEUED,
                                                                        JobState.RUNNING),
                       JOB_DEADLINE_S, interval_s=0.05)
            elapsed_s = time.monotonic() - start
            job = store.get_job(job_id)
            if job.state is not JobState.SUCCEEDED:
                print(f"farm job {job_id} {job.state.value}: {job.error}", file=sys.stderr)
                return 1
            # Let the phone come back to ready before the script asks for it.
            wait_until(lambda: store.get_device(serial).state is DeviceState.READY, 30,
                       interval_s=0.05)
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
                f"{label}: farm {elapsed_s:.2f} s ({store.results(job_id)[0].summary['gflops']:.2f}"
                f" GFLOPS), script {wall_s:.2f} s ({gflops:.2f} GFLOPS)",
                flush=True,
            )
            if run:
                farm_s.append(elapsed_s)
                farm_gflops.append(store.results(job_id)[0].summary["gflops"])
                script_s.append(wall_s)
                script_gflops.append(gflops)
    f, s = statistics.median(farm_s), statistics.median(script_s)
    print(f"\nGEMM {args.n} on one virtual phone, median of {args.runs}:")
    print(f"  farm queue (enqueue -> result stored): {f:.2f} s, "
          f"{statistics.median(farm_gflops):.2f} GFLOPS")
    print(f"  hand-written tracker script:           {s:.2f} s, "
          f"{statistics.median(script_gflops):.2f} GFLOPS")
    print(f"  wall time ratio farm / script: {f / s:.2f}   GFLOPS ratio: "
          f"{statistics.median(farm_gflops) / statistics.median(script_gflops):.2f}")
    print(f"reproduce: python bench/bench_overhead.py --n {args.n} --runs {args.runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
