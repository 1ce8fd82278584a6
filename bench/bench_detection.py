"""Detection and false-alarm rates of compare at the default settings, and their phone time.

Runs one virtual phone's RPC process (:func:`farm.virtual.testing.rpc_app`,
quiet by default), loads GEMM N through one session and takes whole
measurements as a gemm job does at the defaults: the spec's default timing
(``--number``, ``--samples``, ``--min-repeat-ms`` of :class:`farm.kinds.gemm.GemmSpec`),
then ``[results]``'s warm-up and sampling rule
(:func:`farm.sampling.take_samples`). Each try is two measurements one
after the other, as two jobs would be: at full speed, then with the throttle
knob at the factor; :func:`farm.stats.compare_samples` judges them at
the default threshold and alpha. Printed per factor (0.97, 0.95, 0.90, and 1.0
for false alarms): how often the verdict is ``slower`` (the detection rate;
for 1.0 the false-alarm rate), the other verdicts, the median ratio, and the
phone time one comparison costs (both measurements, warm-up included) with
its samples.

A 0.97 throttle is a 3% change, under the default 5% threshold, but above
half of it, so a significant one is named. On a shared host the knob slows
the phone by less than asked when other work competes
(:mod:`farm.virtual.throttle`), and the other work moves the phone's speed
between two measurements: ``--drawn`` then also prints the rates of tries
drawn from timings recorded at the speeds in turn, sample by sample (as
tests/jobs/test_jobs_throttle_compare.py does), which show the verdict's
power on the phone's own noise.

Reproduce::

    python bench/bench_detection.py --tries 10 --drawn 150
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
from _stats import percentile

from farm import composition
from farm.clock import FakeClock
from farm.config import ResultSettings
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import LoadedGemm, load_gemm
from farm.jobs.params import DeviceFacts, GemmParams, ThreadPoolParams, TrackerParams
from farm.jobs.targets import target_for
from farm.kinds.gemm import GemmSpec, gemm_params
from farm.sampling import SamplingRule, take_samples
from farm.stats import Comparison, compare_samples, robust_cv
from farm.virtual.testing import RpcApp, rpc_app

FACTORS = (0.97, 0.95, 0.90, 1.0)


def _measure(app: RpcApp, gemm: LoadedGemm, rule: SamplingRule, speed: float,
             spec: GemmParams) -> tuple[list[float], float]:
    """One default measurement at ``speed``: its samples and the wall time it took, s."""
    app.set_speed(speed)
    start = time.monotonic()
    try:
        sampled = take_samples(lambda repeat: gemm.time(replace(spec.timing, repeat=repeat)),
                               rule, at_least=spec.timing.repeat)
    finally:
        app.set_speed(1.0)
    return sampled.samples_s, time.monotonic() - start


def _why(c: Comparison) -> str:
    """The verdict, and for undecided its kind of reason."""
    if c.verdict.value != "undecided":
        return c.verdict.value
    return "undecided: noisy" if "noisy" in c.reason else "undecided: CI wide"


def _record(app: RpcApp, gemm: LoadedGemm, spec: GemmParams, n: int) -> dict[float, np.ndarray]:
    """speed -> ``n`` samples at the default timing, the speeds taken in turn sample by sample."""
    one = replace(spec.timing, repeat=1)
    samples: dict[float, list[float]] = {speed: [] for speed in FACTORS}
    for _ in range(n):
        for speed in FACTORS:
            app.set_speed(speed)
            samples[speed] += gemm.time(one)
    app.set_speed(1.0)
    return {speed: np.asarray(values) for speed, values in samples.items()}


def _drawn(pool: np.ndarray, rule: SamplingRule, spec: GemmParams, seed: int) -> list[float]:
    """One default measurement (warm-up, then the rule) drawn from recorded samples."""
    rng = np.random.default_rng(seed)
    clock = FakeClock()

    def time_batch(repeat: int) -> list[float]:
        drawn = [float(v) for v in rng.choice(pool, repeat)]
        clock.advance(spec.timing.number * sum(drawn))
        return drawn

    return take_samples(time_batch, rule, at_least=spec.timing.repeat, clock=clock).samples_s


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="matrix side N")
    parser.add_argument("--tries", type=int, default=10, help="comparisons per factor")
    parser.add_argument("--drawn", type=int, default=0, metavar="N",
                        help="also record N samples a speed and judge 100 tries drawn from them")
    parser.add_argument("--quiet", action=argparse.BooleanOptionalAction, default=True,
                        help="give the phone's process priority over the host's other work "
                             "(then one thread: real-time work on every CPU starves the host)")
    args = parser.parse_args(argv)

    defaults = ResultSettings()
    rule = SamplingRule.of(defaults)
    spec = gemm_params(GemmSpec(n=args.n))
    if args.quiet:
        spec = replace(spec, threads=ThreadPoolParams(affinity_mode=0, num_threads=1))
    lines = []
    with tempfile.TemporaryDirectory(prefix="farm-bench-detection-") as tmp:
        root = Path(tmp)
        with rpc_app(root, key="bench-detection", quiet=args.quiet) as app:
            tracker = TrackerParams(app.tracker_host, app.tracker_port, app.key,
                                    session_timeout_s=900, serial="virtual")
            facts = DeviceFacts(abi="x86_64", host_runtime=True, num_cores=os.cpu_count() or 1)
            gemm = load_gemm(spec, target_for(facts), tracker, CompileCache(root / "cache"))
            for factor in FACTORS:
                verdicts: Counter[str] = Counter()
                ratios, phone_s, samples = [], [], []
                for _ in range(args.tries):
                    a, a_s = _measure(app, gemm, rule, 1.0, spec)
                    b, b_s = _measure(app, gemm, rule, factor, spec)
                    c = compare_samples(a, b, threshold=defaults.change_threshold,
                                        alpha=defaults.alpha, max_cv=defaults.max_cv)
                    verdicts[_why(c)] += 1
                    ratios.append(c.ratio)
                    phone_s.append(a_s + b_s)
                    samples.append(len(a) + len(b))
                rate = verdicts["slower"] / args.tries
                label = "false alarm" if factor == 1.0 else "detection"
                lines.append(
                    f"factor {factor:.2f} (time x{1 / factor:.3f}): {label} rate {rate:.0%} "
                    f"({verdicts['slower']}/{args.tries}); verdicts {dict(verdicts)}; "
                    f"median ratio {statistics.median(ratios):.3f}; phone time per comparison "
                    f"p50 {percentile(phone_s, 50):.1f} s, p95 {percentile(phone_s, 95):.1f} s; "
                    f"samples per comparison p50 {percentile(samples, 50):.0f}")
            if args.drawn:
                pools = _record(app, gemm, spec, args.drawn)
                lines.append("recorded, robust CV by speed: " + ", ".join(
                    f"{speed:g} {robust_cv(pool):.1%}" for speed, pool in pools.items())
                    + f" (max_cv {defaults.max_cv:.0%}); time ratio to full speed: " + ", ".join(
                    f"{speed:g} {np.median(pool) / np.median(pools[1.0]):.3f}"
                    for speed, pool in pools.items() if speed != 1.0))
                for factor in FACTORS:
                    tries = [compare_samples(_drawn(pools[1.0], rule, spec, 2 * i),
                                             _drawn(pools[factor], rule, spec, 2 * i + 1),
                                             threshold=defaults.change_threshold,
                                             alpha=defaults.alpha, max_cv=defaults.max_cv)
                             for i in range(100)]
                    drawn = Counter(_why(c) for c in tries)
                    label = "false alarm" if factor == 1.0 else "detection"
                    lines.append(f"drawn from {args.drawn} recorded samples a speed, factor "
                                 f"{factor:.2f}: {label} rate {drawn['slower']}% of 100 tries; "
                                 f"verdicts {dict(drawn)}")
            favoured = app.favoured
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} cores, load average {load[0]:.1f}; phone process "
          f"{'given priority' if favoured else 'not given priority (no CAP_SYS_NICE or asked)'}")
    print(f"GEMM {args.n}, number {spec.timing.number}, at least {spec.timing.repeat} samples; "
          f"[results] min_samples {rule.min_samples}, max_samples {rule.max_samples}, "
          f"target_ci_pct {rule.target_ci_pct:g}, min_measure_s {rule.min_measure_s:g}, "
          f"warm-up {rule.warmup_min_s:g}-{rule.warmup_max_s:g} s; threshold "
          f"{defaults.change_threshold:g}, alpha {defaults.alpha:g}")
    print("\n".join(lines))
    print("reproduce: python bench/bench_detection.py " + shlex.join(sys.argv[1:] if argv is None
                                                                    else argv))
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
