"""GEMM GFLOPS against local TVM RPC servers, and optionally the tuned/untuned speedup.

Starts a tracker and ``--phones`` RPC servers on loopback (each standing in for a
phone serving its own tracker key), runs the seeds' GEMM on each through
``farm.jobs.gemm.run_gemm`` with one shared compile cache, and prints GFLOPS per
"phone". With ``--tune-trials T`` it also tunes the workload with MetaSchedule
over all of them and prints the tuned over untuned speedup.

Reproduce::

    python bench/bench_gemm.py --n 512 --bn 32 --phones 1
    python bench/bench_gemm.py --n 256 --phones 2 --tune-trials 16
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

from farm.jobs.cache import CompileCache
from farm.jobs.gemm import run_gemm
from farm.jobs.local_cluster import LocalCluster
from farm.jobs.params import (
    DeviceFacts,
    GemmParams,
    ThreadPoolParams,
    TimingParams,
    TrackerParams,
    TuneParams,
)
from farm.jobs.targets import target_for
from farm.tuning import compare_tuned, tune_gemm


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one line per phone; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512, help="matrix side N")
    parser.add_argument("--bn", type=int, default=32, help="block size")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--phones", type=int, default=1, help="local RPC servers, one key each")
    parser.add_argument("--number", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--min-repeat-ms", type=int, default=200)
    parser.add_argument("--threads", type=int, default=0, help="thread pool size, 0 = all")
    parser.add_argument("--tune-trials", type=int, default=0, help="0 skips tuning")
    args = parser.parse_args(argv)

    facts = DeviceFacts(abi="x86_64", host_runtime=True, num_cores=os.cpu_count() or 1)
    target = target_for(facts)
    timing = TimingParams(args.number, args.repeat, args.min_repeat_ms)
    params = GemmParams(
        n=args.n,
        dtype=args.dtype,
        bn=args.bn,
        timing=timing,
        threads=ThreadPoolParams(affinity_mode=0, num_threads=args.threads),
    )
    cluster = LocalCluster()
    with tempfile.TemporaryDirectory(prefix="bench-gemm-") as tmp:
        try:
            cluster.start_tracker()
            keys = [f"bench-phone-{i}" for i in range(args.phones)]
            for key in keys:
                cluster.add_servers(key, 1)
            cache = CompileCache(Path(tmp) / "cache")
            print(f"GEMM N={args.n} dtype={args.dtype} bn={args.bn} target={target}")
            for key in keys:
                tracker = TrackerParams(cluster.host, cluster.port, key, 600, key)
                started = time.monotonic()
                result = run_gemm(params, target, tracker, cache)
                samples = " ".join(f"{s * 1e3:.3f}" for s in result.samples_s)
                threads = result.threads.num_threads if result.threads else "-"
                print(
                    f"{key}: {result.gflops:.2f} GFLOPS  mean {result.mean_s * 1e3:.3f} ms  "
                    f"samples_ms [{samples}]  threads {threads}"
                    f"  wall {time.monotonic() - started:.1f} s"
                )
            print(f"compile cache: {cache.misses} build(s), {cache.hits} hit(s)")
            if args.tune_trials > 0:
                cluster.add_servers("bench-tune", args.phones)
                tracker = TrackerParams(cluster.host, cluster.port, "bench-tune", 600, "bench-tune")
                tune_params = TuneParams(
                    gemm=params,
                    trials=args.tune_trials,
                    work_dir=Path(tmp) / "tune",
                    runner_workers=args.phones,
                )
                tune = tune_gemm(tune_params, target, tracker)
                compared = compare_tuned(tune_params, target, tracker, tune)
                print(
                    f"tuned {tune.trials_measured} trials: {compared.tuned_gflops:.2f} GFLOPS, "
                    f"speedup over untuned {compared.speedup:.2f}x"
                )
        finally:
            cluster.close()
    print("reproduce: python bench/bench_gemm.py " + shlex.join(argv or sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
