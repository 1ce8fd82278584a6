"""CV of repeated GEMM on one quiet virtual phone, and the ratio the throttle knob gives.

Runs one virtual phone's RPC process (:func:`farm.virtual.testing.rpc_app`:
the process the phone's TVM RPC app runs, under a private tracker, no adb),
loads GEMM N through one session (:func:`farm.jobs.gemm.load_gemm`) and

1. takes ``--samples`` samples of ``--number`` runs each in one
   ``time_evaluator`` call and prints their spread (median, IQR, CV, bootstrap
   95% CI of the median, :func:`farm.stats.spread`); the goal for a
   quiet phone is a CV under 3%;
2. takes ``--samples`` samples at full speed and as many with the throttle knob
   at ``--factor``, alternating one by one so both see the same host, and prints
   :func:`farm.stats.compare_samples` of them: the measured ratio
   against the expected ``1 / factor``.

"Quiet" means the RPC process gets priority over the host's other work where
the host allows it (real-time, else a lower autogroup nice: see ``rpc_app``);
``--no-quiet`` measures it as any process on a shared host. Kernels run on one
thread (``--threads``), as a quiet phone's RPC process must not hold every CPU.

Reproduce::

    python bench/bench_cv.py --n 256 --number 25 --samples 30 --factor 0.9
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from pathlib import Path

from farm.jobs.cache import CompileCache
from farm.jobs.gemm import gemm_flop, load_gemm
from farm.jobs.params import (
    DeviceFacts,
    GemmParams,
    GemmSchedule,
    ThreadPoolParams,
    TimingParams,
    TrackerParams,
)
from farm.jobs.targets import target_for
from farm.stats import compare_samples, spread
from farm.virtual.testing import rpc_app


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="matrix side N")
    parser.add_argument("--number", type=int, default=25, help="runs averaged into one sample")
    parser.add_argument("--samples", type=int, default=30, help="samples per set")
    parser.add_argument("--factor", type=float, default=0.9, help="throttle knob, (0, 1)")
    parser.add_argument("--schedule", choices=["tiled", "naive"], default="tiled")
    parser.add_argument("--threads", type=int, default=1, help="TVM thread pool size")
    parser.add_argument("--quiet", action=argparse.BooleanOptionalAction, default=True,
                        help="give the phone's process priority over the host's other work")
    args = parser.parse_args(argv)
    if not 0.0 < args.factor < 1.0:
        parser.error("--factor must be in (0, 1)")

    one_sample = TimingParams(number=args.number, repeat=1, min_repeat_ms=0)
    params = GemmParams(n=args.n, bn=32, schedule=GemmSchedule(args.schedule), timing=one_sample,
                        threads=ThreadPoolParams(affinity_mode=0, num_threads=args.threads))
    with tempfile.TemporaryDirectory(prefix="farm-bench-cv-") as tmp:
        root = Path(tmp)
        with rpc_app(root, key="bench-cv", quiet=args.quiet) as app:
            tracker = TrackerParams(app.tracker_host, app.tracker_port, app.key,
                                    session_timeout_s=900, serial="virtual")
            facts = DeviceFacts(abi="x86_64", host_runtime=True, num_cores=os.cpu_count() or 1)
            target = target_for(facts)
            gemm = load_gemm(params, target, tracker, CompileCache(root / "cache"))
            gemm.time()  # warm-up: first-run effects are not the phone's spread
            repeated = gemm.time(TimingParams(args.number, args.samples, 0))
            full: list[float] = []
            slow: list[float] = []
            for _ in range(args.samples):
                app.set_speed(1.0)
                full += gemm.time()
                app.set_speed(args.factor)
                slow += gemm.time()
            app.set_speed(1.0)
            favoured = app.favoured

    quiet = spread(repeated)
    comparison = compare_samples(full, slow)
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} cores, load average {load[0]:.1f}; phone process "
          f"{'given priority' if favoured else 'not given priority (no CAP_SYS_NICE or asked)'}")
    print(f"GEMM {args.n} {args.schedule}, {args.threads} thread(s), {args.samples} samples of "
          f"{args.number} runs")
    gflops = gemm_flop(args.n) / quiet.median / 1e9
    print(f"repeated: median {quiet.median * 1e3:.3f} ms ({gflops:.2f} GFLOPS), "
          f"IQR {quiet.iqr * 1e3:.3f} ms, CV {quiet.cv * 100:.2f}% (goal < 3%), "
          f"95% CI of the median [{quiet.ci_low * 1e3:.3f}, {quiet.ci_high * 1e3:.3f}] ms")
    print(f"knob {args.factor:g}: ratio {comparison.ratio:.3f} (expected {1 / args.factor:.3f}), "
          f"95% CI [{comparison.ci_low:.3f}, {comparison.ci_high:.3f}], "
          f"p {comparison.p_value:.2g}, verdict {comparison.verdict.value}")
    print("reproduce: python bench/bench_cv.py " + shlex.join(sys.argv[1:] if argv is None
                                                             else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
