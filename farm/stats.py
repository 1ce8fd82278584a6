"""Spread of one set of raw samples and the comparison of two.

Everything here is pure: lists of floats in, frozen dataclasses out. The
statistics come from scipy (``scipy.stats.bootstrap``, ``mannwhitneyu``,
``iqr``) rather than our own code; only the choice of statistic and the verdict
rule are farm's.

The verdict is three-way, as in equivalence testing (Lakens, "Equivalence
Tests", Social Psychological and Personality Science 8(4), 2017): a change is
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
from enum import Enum
from math import comb
from types import ModuleType

import numpy as np

__all__ = ["Comparison", "Spread", "Verdict", "compare_rounds", "compare_samples",
           "least_p_value", "robust_cv", "samples_for_alpha", "spread"]

#: Bootstrap resamples for a confidence interval; 2000 keeps a 95% CI's ends
#: stable to about 1% of its width and costs ~10 ms for 100 samples.
_RESAMPLES = 2000


def _stats() -> ModuleType:
    """``scipy.stats``, imported on first use.

    farmd imports this module (the regression watch) but computes a statistic
    only when a job finishes under a baseline; ``scipy.stats`` costs ~75 MB
    of resident memory and ~0.8 s at import, which a resting farmd should not pay.
    """
    from scipy import stats

    return stats


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
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Comparison:
    """``b`` against ``a``.

    Attributes:
        ratio: ``median(b) / median(a)``; for timings above 1 means slower.
        ci_low, ci_high: bootstrap 95% interval of that ratio (both samples
            resampled independently).
        p_value: two-sided Mann-Whitney U p-value of ``a`` and ``b`` (1.0 when
            either has fewer than two samples).
        verdict: see :func:`compare_samples`.
        reason: why the verdict, one line (e.g. ``"3 samples a side cannot
            reach alpha 0.01 (Mann-Whitney needs 5)"``).
    """

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: Verdict
    reason: str = ""


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
    res = _stats().bootstrap(
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
        iqr=float(_stats().iqr(x)),
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


#: A change is named only when its estimate lies at least this share of the
#: threshold away from 1 (0.5: nearer the threshold than "no change"). A true
#: change of exactly the threshold then is named as often as the test has
#: power, rather than the half of the time that asking the estimate to pass
#: the threshold itself would give; a significant drift of 1-2% between two
#: runs of one build (host load, heat) is not called a regression.
NAMED_SHARE_OF_THRESHOLD = 0.5


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
    p_value = float(_stats().mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
    if float(np.ptp(xa)) == 0.0 and float(np.ptp(xb)) == 0.0:
        low = high = ratio
    else:
        res = _stats().bootstrap(
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
    verdict, reason = _verdict(ratio, low, high, p_value, threshold=threshold, alpha=alpha)
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
    return float(_stats().median_abs_deviation(x, scale="normal")) / abs(middle)


def _verdict(ratio: float, low: float, high: float, p_value: float, *, threshold: float,
             alpha: float, ci_name: str = "CI") -> tuple[Verdict, str]:
    """The verdict and its reason (see :func:`compare_samples`)."""
    band = f"±{threshold:.0%}"
    ci = f"{ci_name} {low:.3f}-{high:.3f}"
    named = NAMED_SHARE_OF_THRESHOLD * threshold
    if p_value < alpha and low > 1.0 and ratio >= 1.0 + named:
        return Verdict.SLOWER, f"{ratio - 1:+.1%}, p {p_value:.2g} < {alpha:g}, {ci}"
    if p_value < alpha and high < 1.0 and ratio <= 1.0 - named:
        return Verdict.FASTER, f"{ratio - 1:+.1%}, p {p_value:.2g} < {alpha:g}, {ci}"
    if 1.0 - threshold <= low and high <= 1.0 + threshold:
        return Verdict.NO_CHANGE, f"{ci} inside {band}"
    if p_value < alpha:
        return Verdict.UNDECIDED, (f"a change of {ratio - 1:+.1%} (p {p_value:.2g}) is under "
                                   f"{named:.1%} but its {ci} reaches past {band}")
    return Verdict.UNDECIDED, (f"{ci} reaches past {band} and p {p_value:.2g} is not below "
                               f"{alpha:g}: more samples would decide")


#: Rounds an A/B comparison needs before it may name a verdict: the signed-rank
#: test of fewer cannot reach alpha 0.01 (6 rounds at best), and the median's
#: order-statistic interval at 99% needs 8.
MIN_PAIRED_ROUNDS = 8


def compare_rounds(
    a: Sequence[float],
    b: Sequence[float],
    *,
    first: Sequence[str] | None = None,
    threshold: float = 0.05,
    alpha: float = 0.01,
    confidence: float = 0.99,
) -> Comparison:
    """Compare two builds timed in interleaved rounds on one phone: round ``i`` gave ``a[i], b[i]``.

    Two builds timed alternately in one session see the same drift (heat, the
    governor's clocks, other load on the phone): it moves ``a[i]`` and ``b[i]``
    alike and cancels in the round's ratio ``b[i] / a[i]``. So the verdict is
    judged on the rounds' log ratios ``d[i] = log(b[i] / a[i])``, as Kalibera
    and Jones ("Rigorous Benchmarking in Reasonable Time", ISMM 2013) judge
    repeated runs by the ratio's distribution rather than each side's spread.

    With ``first`` (which build each round timed first), the k-th round that
    timed A first is paired with the k-th that timed B first and each pair's
    mean log ratio is one observation (the ABBA design): whatever comes of
    being timed first or second in a round (a cache, the throttle's phase
    against the calls) cancels in the pair, as a steady drift does. Seen on a
    virtual phone throttled to 0.9: without pairs an A/A job was once called
    faster at 0.976. A round left without a partner is not used.

    - the estimate is ``exp(median(d))``, the median ratio;
    - its interval is the distribution-free order-statistic interval of the
      median of ``d`` at ``confidence`` (the sign-test interval, Conover,
      "Practical Nonparametric Statistics", 3rd ed. 1999, sec. 3.2; scipy
      ``quantile_test``), mapped back by ``exp``: it assumes no shape of the
      ratios' distribution, so a round hit by a burst of load shifts it by one
      order statistic at most;
    - the p-value is the Wilcoxon signed-rank test of ``d`` against 0
      (scipy ``wilcoxon``, Wilcoxon 1945);
    - the verdict follows :func:`compare_samples`'s rule (slower/faster:
      p below ``alpha``, the interval past 1 and the estimate at least
      :data:`NAMED_SHARE_OF_THRESHOLD` of ``threshold`` away; no change: the
      interval inside ``±threshold``; else undecided).

    The default ``confidence`` is 99%, not 95%: an A/B job looks at its rounds
    again every few rounds until they decide, and each look is a chance to
    decide wrongly; the wider interval keeps the rate of wrong verdicts over
    all looks near what one look at 95% would give (measured in
    ``bench/bench_ab.py``).

    Args:
        a: the baseline build's timing in each round, seconds, all above zero.
        b: the other build's timing in the same rounds, as long as ``a``.
        first: per round, ``"a"`` or ``"b"``: the build timed first; None
            judges each round on its own.
        threshold: the smallest relative change that counts (0.05 = 5%).
        alpha: the signed-rank p-value a change must be below.
        confidence: the ratio interval's level.

    Raises:
        ValueError: ``a``, ``b`` (and ``first``) differ in length, or hold a
            value that is not finite and above zero.

    >>> c = compare_rounds([1.0, 1.1, 0.9, 1.2] * 5, [1.1, 1.21, 0.99, 1.32] * 5)
    >>> c.verdict.value, round(c.ratio, 3)
    ('slower', 1.1)
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.shape != xb.shape or xa.ndim != 1:
        raise ValueError(f"a and b must be rounds of one length, got {xa.size} and {xb.size}")
    for name, x in (("a", xa), ("b", xb)):
        if not np.all(np.isfinite(x)) or np.any(x <= 0):
            raise ValueError(f"timings of {name} must be finite and above zero")
    d = np.log(xb / xa)
    unit = "rounds"
    if first is not None:
        if len(first) != d.size:
            raise ValueError(f"first must name one build per round, got {len(first)}")
        a_first = d[[i for i, f in enumerate(first) if f == "a"]]
        b_first = d[[i for i, f in enumerate(first) if f != "a"]]
        pairs = min(a_first.size, b_first.size)
        d = (a_first[:pairs] + b_first[:pairs]) / 2
        unit = "pairs of rounds"
    if d.size < MIN_PAIRED_ROUNDS:
        ratio = float(np.exp(np.median(d))) if d.size else 1.0
        return Comparison(ratio, ratio, ratio, 1.0, Verdict.UNDECIDED,
                          f"{d.size} {unit}; an A/B verdict needs {MIN_PAIRED_ROUNDS}")
    middle = float(np.median(d))
    ratio = float(np.exp(middle))
    ci = _stats().quantile_test(d, q=middle, p=0.5).confidence_interval(confidence)
    low, high = float(np.exp(ci.low)), float(np.exp(ci.high))
    # Every round timed both alike: nothing to rank.
    p_value = float(_stats().wilcoxon(d, zero_method="zsplit").pvalue) if np.any(d) else 1.0
    verdict, reason = _verdict(ratio, low, high, p_value, threshold=threshold, alpha=alpha,
                               ci_name=f"{confidence:.0%} CI")
    return Comparison(ratio, low, high, p_value, verdict, f"{reason}; {d.size} {unit}")
