"""Spread of one set of raw samples and the comparison of two sets of them.

Everything here is pure: lists of floats in, frozen dataclasses out. The
statistics come from scipy (``scipy.stats.bootstrap``, ``mannwhitneyu``,
``iqr``) rather than our own code; only the choice of statistic and the verdict
rule are farm's.

The verdict is three-way (:func:`farm.stats.verdict.judge`): a change is
named when the Mann-Whitney U test (scipy ``mannwhitneyu``, Mann and Whitney
1947) rejects "no difference" at ``alpha`` and the bootstrap CI of the median
ratio (Efron and Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13,
percentile interval) excludes 1; "no change" is said only when that CI lies
inside the threshold band; anything else is "undecided", with the reason.

Samples are timings in seconds (smaller is faster) unless stated otherwise.
A ratio is ``median(b) / median(a)``: above 1 means ``b`` is slower than ``a``
for timings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

import numpy as np

from farm.stats.verdict import Comparison, Verdict, judge, scipy_stats

__all__ = ["Spread", "compare_samples", "least_p_value", "robust_cv", "samples_for_alpha",
           "spread"]

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
    res = scipy_stats().bootstrap(
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
        iqr=float(scipy_stats().iqr(x)),
        cv=abs(cv),
        ci_low=float(res.confidence_interval.low),
        ci_high=float(res.confidence_interval.high),
    )


def _median_ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(b, axis=axis) / np.median(a, axis=axis)


def least_p_value(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value a Mann-Whitney U test of ``n_a`` against ``n_b`` can give.

    With no ties the exact null distribution puts ``1 / C(n_a + n_b, n_a)``
    on each extreme ordering (every ``a`` below every ``b``), so two-sided the
    least p is ``2 / C(n_a + n_b, n_a)`` (Mann and Whitney 1947): 0.1 for 3
    against 3, 0.0079 for 5 against 5. Below ``alpha`` or no verdict can be
    "slower", whatever the data.
    """
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2.0 / comb(n_a + n_b, n_a))


def samples_for_alpha(alpha: float) -> int:
    """The fewest samples a side (equal sides) whose :func:`least_p_value` is below ``alpha``."""
    n = 1
    while least_p_value(n, n) >= alpha:
        n += 1
    return n


def compare_samples(
    a: Sequence[float],
    b: Sequence[float],
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
    confidence: float = 0.95,
    seed: int | None = 0,
    max_cv: float | None = None,
) -> Comparison:
    """Compare samples ``b`` (new) with ``a`` (baseline), both timings of one phone.

    The verdict, with ``r`` the median ratio b/a and ``[lo, hi]`` its bootstrap CI:

    - UNDECIDED when the sample counts cannot reach ``alpha`` at all
      (:func:`least_p_value`): 3 against 3 is never "no change".
    - SLOWER (FASTER) when the Mann-Whitney p-value is below ``alpha``, the
      CI lies above (below) 1 and ``r`` is at least
      ``1 + NAMED_SHARE_OF_THRESHOLD * threshold`` (at most ``1 - ...``).
    - NO_CHANGE when the whole CI lies inside ``[1 - threshold, 1 + threshold]``
      (equivalence shown, as a two one-sided test at the CI's level would).
    - UNDECIDED otherwise: the CI is too wide to rule a change of
      ``threshold`` in or out; more samples would decide.
    - UNDECIDED in place of SLOWER/FASTER when ``max_cv`` is given and either
      side's robust CV (:func:`robust_cv`) is above it: the test assumes
      samples of one steady speed, and a side that spread (a phone sharing
      its CPUs with other work, heating) moves by more than the change
      between two runs of one build. "No change" still stands on a narrow CI.

    Args:
        a: the baseline's raw values, at least one, all above zero.
        b: the new values, in ``a``'s unit, at least one, all above zero.
        threshold: the smallest relative change that counts (0.05 = 5%).
        alpha: the Mann-Whitney p-value a change must be below.
        confidence: the ratio interval's level.
        seed: the bootstrap's random seed.
        max_cv: a side whose :func:`robust_cv` is above this (a fraction)
            cannot support a change; None judges no spread.

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
    least = least_p_value(int(xa.size), int(xb.size))
    if xa.size < 2 or xb.size < 2 or least >= alpha:
        return Comparison(ratio, ratio, ratio, 1.0, Verdict.UNDECIDED,
                          f"{xa.size} against {xb.size} samples cannot reach alpha {alpha:g} "
                          f"(Mann-Whitney needs {samples_for_alpha(alpha)} a side)")
    p_value = float(scipy_stats().mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
    if float(np.ptp(xa)) == 0.0 and float(np.ptp(xb)) == 0.0:
        low = high = ratio
    else:
        res = scipy_stats().bootstrap(
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
    verdict, reason = judge(ratio, low, high, p_value, threshold=threshold, alpha=alpha)
    if max_cv is not None and verdict in (Verdict.SLOWER, Verdict.FASTER):
        spreads = [f"{name} {cv:.0%}" for name, x in (("A", xa), ("B", xb))
                   if (cv := robust_cv(x)) > max_cv]
        if spreads:
            return Comparison(ratio, low, high, p_value, Verdict.UNDECIDED,
                              f"{verdict.value} ({reason}), but the samples are noisy "
                              f"(robust CV {', '.join(spreads)} > {max_cv:.0%}): measure again")
    return Comparison(ratio, low, high, p_value, verdict, reason)


def robust_cv(samples: Sequence[float] | np.ndarray) -> float:
    """The spread of ``samples`` as a fraction of their median, blind to a few outliers.

    ``1.4826 * MAD / median`` (``scipy.stats.median_abs_deviation`` with
    ``scale="normal"``; Rousseeuw and Croux, JASA 88(424), 1993): equal to the
    CV for normal samples, but one sample hit by a hiccup does not raise it,
    where it would raise the CV past ``max_cv`` on an otherwise steady phone.
    """
    x = np.asarray(samples, dtype=float)
    middle = float(np.median(x))
    if x.size < 2 or middle == 0:
        return 0.0
    return float(scipy_stats().median_abs_deviation(x, scale="normal")) / abs(middle)
