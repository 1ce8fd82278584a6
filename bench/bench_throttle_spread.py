"""Where a quiet virtual phone's spread comes from: host load, the throttle, the sample's length.

For each throttle period (``--period-ms``, :data:`farm.virtual.throttle.PERIOD_MS`)
it starts one quiet virtual phone's RPC process (:func:`farm.virtual.testing.rpc_app`),
loads GEMM N (one thread) and, for each ``--min-repeat-ms``, records
``--samples`` samples of ``--number`` runs at each of ``--speeds`` in turn,
sample by sample (as tests/jobs/test_jobs_throttle_compare.py records), then
prints each speed's robust CV (:func:`farm.stats.robust_cv`, the statistic
``max_cv`` judges), each throttled speed's median time ratio against full
speed beside the ``1 / F`` it names, and the load average. ``--recordings``
repeats every recording, to see how often the host's bursts spread one.

Reproduce::

    python bench/bench_throttle_spread.py --period-ms 1 --min-repeat-ms 0 --recordings 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import farm.virtual.throttle
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import load_gemm
from farm.jobs.params import DeviceFacts, GemmParams, ThreadPoolParams, TimingParams, TrackerParams
from farm.jobs.targets import target_for
from farm.stats import robust_cv
from farm.virtual.testing import rpc_app


def _floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",")]


def main(argv: list[str] | None = None) -> int:
    """Record and print the spreads; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="matrix side N")
    parser.add_argument("--number", type=int, default=10, help="runs a sample (gemm default)")
    parser.add_argument("--samples", type=int, default=150, help="samples a speed a recording")
    parser.add_argument("--speeds", type=_floats, default=[1.0, 0.95, 0.9])
    parser.add_argument("--period-ms", type=_floats, default=[farm.virtual.throttle.PERIOD_MS])
    parser.add_argument("--min-repeat-ms", type=_floats, default=[0.0])
    parser.add_argument("--recordings", type=int, default=1, help="recordings of each setting")
    args = parser.parse_args(argv)
    speeds = [1.0, *(s for s in args.speeds if s != 1.0)]
    print(f"host: {os.cpu_count()} cores; GEMM {args.n}, {args.number} runs a sample, "
          f"{args.samples} samples a speed a recording")
    for period_ms in args.period_ms:
        farm.virtual.throttle.PERIOD_MS = period_ms  # read when a throttler starts
        with tempfile.TemporaryDirectory(prefix="farm-bench-spread-") as tmp, \
                rpc_app(Path(tmp), key="bench-spread", quiet=True) as app:
            tracker = TrackerParams(app.tracker_host, app.tracker_port, app.key,
                                    session_timeout_s=900, serial="virtual", connect_timeout_s=60)
            params = GemmParams(n=args.n, bn=32, timing=TimingParams(args.number, 1, 0),
                                threads=ThreadPoolParams(affinity_mode=0, num_threads=1))
            facts = DeviceFacts(abi="x86_64", host_runtime=True, num_cores=os.cpu_count() or 1)
            gemm = load_gemm(params, target_for(facts), tracker, CompileCache(Path(tmp) / "c"))
            for min_repeat_ms in args.min_repeat_ms:
                one = TimingParams(args.number, 1, int(min_repeat_ms))
                gemm.time(one)  # warm
                for _ in range(args.recordings):
                    samples: dict[float, list[float]] = {speed: [] for speed in speeds}
                    for _ in range(args.samples):
                        for speed in speeds:
                            app.set_speed(speed)
                            samples[speed] += gemm.time(one)
                    app.set_speed(1.0)
                    full = statistics.median(samples[1.0])
                    cvs = ", ".join(f"{s:g} {robust_cv(v):.1%}" for s, v in samples.items())
                    ratios = ", ".join(f"{s:g} {statistics.median(samples[s]) / full:.3f} "
                                       f"(x{1 / s:.3f})" for s in speeds[1:])
                    print(f"period {period_ms:g} ms, min_repeat_ms {min_repeat_ms:g}: "
                          f"run {full * 1e3:.3f} ms; robust CV {cvs}; ratio {ratios}; "
                          f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
