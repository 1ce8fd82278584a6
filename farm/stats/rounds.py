"""Two builds timed in interleaved rounds on one phone: the A/B job's comparison.

Pure, as :mod:`farm.stats.samples`: timings in seconds in, a
:class:`~farm.stats.verdict.Comparison` out, judged by the same three-way rule
(:func:`farm.stats.verdict.judge`) on the rounds' ratios.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from farm.stats.verdict import Comparison, Verdict, judge, scipy_stats

__all__ = ["MIN_PAIRED_ROUNDS", "compare_rounds"]


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
    - the verdict follows :func:`~farm.stats.verdict.judge` (slower/faster:
      p below ``alpha``, the interval past 1 and the estimate at least
      :data:`~farm.stats.verdict.NAMED_SHARE_OF_THRESHOLD` of ``threshold``
      away; no change: the interval inside ``±threshold``; else undecided).

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
    ci = scipy_stats().quantile_test(d, q=middle, p=0.5).confidence_interval(confidence)
    low, high = float(np.exp(ci.low)), float(np.exp(ci.high))
    # Every round timed both alike: nothing to rank.
    p_value = float(scipy_stats().wilcoxon(d, zero_method="zsplit").pvalue) if np.any(d) else 1.0
    verdict, reason = judge(ratio, low, high, p_value, threshold=threshold, alpha=alpha,
                               ci_name=f"{confidence:.0%} CI")
    return Comparison(ratio, low, high, p_value, verdict, f"{reason}; {d.size} {unit}")
