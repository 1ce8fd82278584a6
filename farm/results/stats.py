"""Spread of one set of raw samples and the comparison of two.

Everything here is pure: lists of floats in, frozen dataclasses out. The
statistics come from scipy (``scipy.stats.bootstrap``, ``mannwhitneyu``,
``iqr``) rather than our own code; only the choice of statistic and the verdict
rule are farm's.

Samples are timings in seconds (smaller is faster) unless stated otherwise.
A ratio is ``median(b) / median(a)``: above 1 means ``b`` is slower than ``a``
for timings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
from scipy import stats

__all__ = ["Comparison", "Spread", "Verdict", "compare_samples", "spread"]

#: Bootstrap resamples for a confidence interval; 2000 keeps a 95% CI's ends
#: stable to about 1% of its width and costs ~10 ms for 100 samples.
_RESAMPLES = 2000


@dataclass(frozen=True)
class Spread:
    """The spread of one result's samples, all in the samples' unit except ``cv``.

    Attributes:
        n: how many samples.
        median: their median.
        iqr: interquartile range (p75 - p25).
        cv: coefficient of variation, standard deviation (ddof=1) over mean;
            0.0 for fewer than two samples.
        ci_low, ci_high: bootstrap 95% (or ``confidence``) interval of the median
            (BCa would fail on ties, so percentile); both equal the median for
            fewer than two samples or no variation.
    """

    n: int
    median: float
    iqr: float
    cv: float
    ci_low: float
    ci_high: float

    def noisy(self, max_cv: float) -> bool:
        """True when ``cv`` is above ``max_cv`` (a fraction, e.g. 0.05)."""
        return self.cv > max_cv


class Verdict(str, Enum):
    """One phone's verdict when ``b`` is compared with ``a`` (timings)."""

    SLOWER = "slower"
    FASTER = "faster"
    NO_CHANGE = "no change"


@dataclass(frozen=True)
class Comparison:
    """``b`` against ``a``.

    Attributes:
        ratio: ``median(b) / median(a)``; for timings above 1 means slower.
        ci_low, ci_high: bootstrap 95% interval of that ratio (both samples
            resampled independently).
        p_value: two-sided Mann-Whitney U p-value of ``a`` and ``b`` (1.0 when
            either has fewer than two samples).
        verdict: SLOWER/FASTER when the p-value is below ``alpha`` and the
            ratio differs from 1 by at least ``threshold``; else NO_CHANGE.
    """

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: Verdict


def _rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(seed)


def spread(samples: Sequence[float], *, confidence: float = 0.95, seed: int | None = 0) -> Spread:
    """Median, IQR, CV and a bootstrap CI of the median of ``samples``.

    Args:
        samples: raw values (at least one), e.g. seconds per run.
        confidence: the interval's level, in (0, 1).
        seed: the bootstrap's random seed; fixed by default so that the same
            samples always give the same interval.

    Raises:
        ValueError: no samples, or a value that is not finite.
    """
    x = np.asarray(samples, dtype=float)
    if x.size == 0:
        raise ValueError("spread of no samples")
    if not np.all(np.isfinite(x)):
        raise ValueError("samples must be finite numbers")
    median = float(np.median(x))
    if x.size < 2 or float(np.ptp(x)) == 0.0:
        return Spread(int(x.size), median, 0.0, 0.0, median, median)
    mean = float(np.mean(x))
    cv = float(np.std(x, ddof=1) / mean) if mean != 0 else float("inf")
    res = stats.bootstrap(
        (x,),
        np.median,
        confidence_level=confidence,
        n_resamples=_RESAMPLES,
        method="percentile",
        vectorized=True,
        rng=_rng(seed),
    )
    return Spread(
        n=int(x.size),
        median=median,
        iqr=float(stats.iqr(x)),
        cv=abs(cv),
        ci_low=float(res.confidence_interval.low),
        ci_high=float(res.confidence_interval.high),
    )


def _median_ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(b, axis=axis) / np.median(a, axis=axis)


def compare_samples(
    a: Sequence[float],
    b: Sequence[float],
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> Comparison:
    """Compare samples ``b`` (new) with ``a`` (baseline), both timings of one phone.

    Args:
        a: the baseline's raw values, at least one, all above zero.
        b: the new values, in ``a``'s unit, at least one, all above zero.
        threshold: the smallest relative change that counts (0.05 = 5%).
        alpha: the Mann-Whitney p-value a change must be below.
        confidence: the ratio interval's level.
        seed: the bootstrap's random seed.

    Raises:
        ValueError: an empty sample, or a value that is not finite and above zero.
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    for name, x in (("a", xa), ("b", xb)):
        if x.size == 0:
            raise ValueError(f"no samples in {name}")
        if not np.all(np.isfinite(x)) or np.any(x <= 0):
            raise ValueError(f"samples of {name} must be finite and above zero")
    ratio = float(np.median(xb) / np.median(xa))
    if xa.size < 2 or xb.size < 2:
        return Comparison(ratio, ratio, ratio, 1.0, Verdict.NO_CHANGE)
    p_value = float(stats.mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
    if float(np.ptp(xa)) == 0.0 and float(np.ptp(xb)) == 0.0:
        low = high = ratio
    else:
        res = stats.bootstrap(
            (xa, xb),
            _median_ratio,
            confidence_level=confidence,
            n_resamples=_RESAMPLES,
            method="percentile",
            vectorized=True,
            paired=False,
            rng=_rng(seed),
        )
        low = float(res.confidence_interval.low)
        high = float(res.confidence_interval.high)
    verdict = Verdict.NO_CHANGE
    if p_value < alpha and abs(ratio - 1.0) >= threshold:
        verdict = Verdict.SLOWER if ratio > 1.0 else Verdict.FASTER
    return Comparison(ratio, low, high, p_value, verdict)
