"""How many samples a measurement takes: warm up until steady, then until the median is known.

Two rules, both bounded, both in ``[results]`` (:class:`farm.config.ResultSettings`):

- **Warm-up** (:func:`warm_up`): time the kernel one sample at a time and
  throw the samples away until the timing is steady: the median of the last
  :data:`WARMUP_WINDOW` samples lies within ``warmup_steady_pct`` of the
  median of the window before, and at least ``warmup_min_s`` of warm-up has
  passed; at ``warmup_max_s`` it stops unsteady (and says so). This is the
  shape of AndroidX Microbenchmark's warm-up (``WarmupManager``: iterate until
  a fast and a slow moving average of the iteration time agree within a
  threshold, bounded below and above by durations), with medians of windows in
  place of moving averages, as farm's samples are few and a single sample hit
  by the host is an outlier, not a trend. A phone's first run after
  provisioning or a long idle (cold caches, clocks still low, page faults of a
  fresh process) is so kept out of the comparison.
- **Sampling** (:func:`take_samples`): take ``min_samples`` (or the spec's
  ``repeat`` if more), then more until the 95% CI of the median (:func:`ci_pct`) is no
  wider than ``target_ci_pct`` of the median and the samples span
  ``min_measure_s``, or ``max_samples`` are taken.
  This is MLPerf Inference LoadGen's rule for a performance run (a minimum
  query count and a minimum duration, then as many more as the statistics
  need, its "early stopping" criterion bounding a percentile's confidence),
  applied to the median farm compares. ``min_samples`` is above what a
  Mann-Whitney test needs to reach ``alpha`` at all
  (:func:`farm.stats.samples_for_alpha`: 5 a side for 0.01).

Two or more builds compared on one host are timed in interleaved rounds
(:func:`interleaved_rounds`): each once a round, so a change of the host's
load between rounds hits them alike, where back to back it would bias their
ratio.

All take callables that time the kernel, so they are pure of RPC and tested
with recorded timings; :func:`farm.jobs.gemm.run_gemm` and
:func:`farm.jobs.model.run_model` hand them ``time_evaluator``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from farm.clock import Clock, SystemClock
from farm.config import ResultSettings

__all__ = ["WARMUP_WINDOW", "Sampled", "SamplingRule", "WarmUp", "ci_pct", "interleaved_rounds",
           "take_samples", "warm_up"]

#: Warm-up samples whose median is compared with the window before.
WARMUP_WINDOW = 3


@dataclass(frozen=True)
class SamplingRule:
    """The warm-up and sampling bounds (see the module doc); from :meth:`of` the config."""

    min_samples: int
    max_samples: int
    target_ci_pct: float
    min_measure_s: float
    warmup_min_s: float
    warmup_max_s: float
    warmup_steady_pct: float

    @classmethod
    def of(cls, results: ResultSettings) -> SamplingRule:
        """The rule ``[results]`` sets."""
        return cls(results.min_samples, results.max_samples, results.target_ci_pct,
                   results.min_measure_s, results.warmup_min_s, results.warmup_max_s,
                   results.warmup_steady_pct)

    def per_round(self, rounds: int) -> SamplingRule:
        """This rule's share for one of ``rounds`` interleaved rounds (:func:`interleaved_rounds`).

        The samples (at least 2 a round) and the least durations are split over
        the rounds, so that the rounds together take about what one measurement
        by this rule takes; each round warms up again (a new session, the
        library loaded again), up to ``warmup_max_s`` as before.

        >>> rule = SamplingRule(10, 60, 4.0, 1.0, 1.0, 10.0, 5.0)
        >>> rule.per_round(2)
        SamplingRule(min_samples=5, max_samples=30, target_ci_pct=4.0, min_measure_s=0.5, \
warmup_min_s=0.5, warmup_max_s=10.0, warmup_steady_pct=5.0)
        """
        rounds = max(rounds, 1)
        least = max(2, -(-self.min_samples // rounds))
        return replace(self, min_samples=least,
                       max_samples=max(least, -(-self.max_samples // rounds)),
                       min_measure_s=self.min_measure_s / rounds,
                       warmup_min_s=self.warmup_min_s / rounds)


@dataclass(frozen=True)
class WarmUp:
    """What warming up cost.

    Attributes:
        runs: samples timed and thrown away.
        seconds: wall time it took, s.
        steady: whether the timing settled before ``warmup_max_s``.
    """

    runs: int
    seconds: float
    steady: bool


@dataclass(frozen=True)
class Sampled:
    """The samples kept and how they were reached.

    Attributes:
        samples_s: the measured samples, seconds (warm-up excluded).
        warmup: the warm-up before them.
        ci_pct: width of the 95% CI of their median, % of the median (:func:`ci_pct`).
        reached_target: ``ci_pct`` is within the target (else the cap stopped it).
        seconds: wall time the samples took, s (warm-up not counted).
    """

    samples_s: list[float]
    warmup: WarmUp
    ci_pct: float
    reached_target: bool
    seconds: float = 0.0


def _steady(samples: list[float], steady_pct: float) -> bool:
    if len(samples) < 2 * WARMUP_WINDOW:
        return False
    last = statistics.median(samples[-WARMUP_WINDOW:])
    before = statistics.median(samples[-2 * WARMUP_WINDOW:-WARMUP_WINDOW])
    return abs(last - before) <= before * steady_pct / 100


def warm_up(time_one: Callable[[], float], rule: SamplingRule,
            clock: Clock | None = None) -> WarmUp:
    """Time one sample at a time, discarding each, until the timing is steady (module doc).

    Args:
        time_one: times one sample, returns seconds per run.
        rule: the warm-up bounds.
        clock: the time of the bounds; the system's by default.

    Raises:
        What ``time_one`` raises.
    """
    clock = clock or SystemClock()
    start = clock.monotonic()
    samples: list[float] = []
    while True:
        samples.append(time_one())
        elapsed = clock.monotonic() - start
        if elapsed >= rule.warmup_min_s and _steady(samples, rule.warmup_steady_pct):
            return WarmUp(len(samples), elapsed, True)
        if elapsed >= rule.warmup_max_s:
            return WarmUp(len(samples), elapsed, False)


def ci_pct(samples: list[float]) -> float:
    """Width of the distribution-free 95% CI of the median of ``samples``, % of the median.

    The order-statistic interval of a quantile (Conover, "Practical
    Nonparametric Statistics", 3rd ed. 1999, sec. 3.2; ``scipy.stats.quantile_test``),
    not the bootstrap: at 10 samples a percentile bootstrap of the median is
    too narrow (it cannot reach past the sample's own order statistics and its
    resampled medians cluster), and sampling would stop before the median is
    known. Infinite for fewer than the 6 samples a 95% interval needs.
    """
    x = np.asarray(samples, dtype=float)
    middle = float(np.median(x))
    if x.size < 6 or middle <= 0:
        return float("inf")
    ci = stats.quantile_test(x, q=middle, p=0.5).confidence_interval(0.95)
    return 100 * (float(ci.high) - float(ci.low)) / middle


def take_samples(time_batch: Callable[[int], list[float]], rule: SamplingRule, *,
                 at_least: int = 0, clock: Clock | None = None) -> Sampled:
    """Warm up, then sample until the median's CI is within the target or the cap is reached.

    Args:
        time_batch: times that many samples, returns seconds per run of each.
        rule: the bounds.
        at_least: samples to take in any case (the spec's ``repeat``); the
            cap is raised to it if below.
        clock: as :func:`warm_up`.

    Raises:
        What ``time_batch`` raises.
    """
    clock = clock or SystemClock()
    warm = warm_up(lambda: time_batch(1)[0], rule, clock)
    start = clock.monotonic()
    cap = max(rule.max_samples, at_least)
    samples = list(time_batch(min(cap, max(rule.min_samples, at_least))))
    width = ci_pct(samples)
    step = max(1, rule.min_samples // 2)
    while len(samples) < cap and (width > rule.target_ci_pct
                                  or clock.monotonic() - start < rule.min_measure_s):
        samples += time_batch(min(step, cap - len(samples)))
        width = ci_pct(samples)
    return Sampled(samples, warm, width, width <= rule.target_ci_pct, clock.monotonic() - start)


def interleaved_rounds(timers: Mapping[str, Callable[[], Sequence[float]]],
                       rounds: int) -> dict[str, list[float]]:
    """Each timer once a round, ``rounds`` rounds; every name's samples from the same rounds.

    The order turns round every other round (A B, B A, A B...), so that no
    timer always runs right after the same one (a build's cache left warm,
    a thermal step after the heavier one). Timed back to back instead, a
    load that changes while the first is timed biases the ratio of the two;
    ``bench/bench_zoo.py`` timed onnxruntime, untuned and tuned this way
    since its first figures.

    Args:
        timers: name -> times it once, returning its samples (seconds each).
        rounds: the rounds (0: no samples).

    Returns:
        name -> its samples, in the order taken.

    >>> calls = []
    >>> interleaved_rounds({"a": lambda: calls.append("a") or [1.0],
    ...                     "b": lambda: calls.append("b") or [2.0]}, 3), calls
    ({'a': [1.0, 1.0, 1.0], 'b': [2.0, 2.0, 2.0]}, ['a', 'b', 'b', 'a', 'a', 'b'])
    """
    names = list(timers)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for number in range(rounds):
        for name in names if number % 2 == 0 else reversed(names):
            samples[name] += [float(s) for s in timers[name]()]
    return samples
