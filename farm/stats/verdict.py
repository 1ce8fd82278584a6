"""The three-way verdict of a comparison: slower, faster, no change or undecided.

The rule is equivalence testing's (Lakens, "Equivalence Tests", Social
Psychological and Personality Science 8(4), 2017): a change is named when the
test rejects "no difference" at ``alpha`` and the ratio's interval excludes 1;
"no change" is said only when that interval lies inside the threshold band;
anything else is "undecided", with the reason. :func:`judge` applies it for both
comparisons, of two sets of samples (:mod:`farm.stats.samples`) and of paired
rounds (:mod:`farm.stats.rounds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from types import ModuleType

__all__ = ["NAMED_SHARE_OF_THRESHOLD", "Comparison", "Verdict", "judge", "scipy_stats"]


def scipy_stats() -> ModuleType:
    """``scipy.stats``, imported on first use.

    farmd imports this module (the regression watch) but computes a statistic
    only when a job finishes under a baseline; ``scipy.stats`` costs ~75 MB
    of resident memory and ~0.8 s at import, which a resting farmd should not pay.
    """
    from scipy import stats

    return stats


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
        verdict: see :func:`farm.stats.compare_samples`.
        reason: why the verdict, one line (e.g. ``"3 samples a side cannot
            reach alpha 0.01 (Mann-Whitney needs 5)"``).
    """

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: Verdict
    reason: str = ""


#: A change is named only when its estimate lies at least this share of the
#: threshold away from 1 (0.5: nearer the threshold than "no change"). A true
#: change of exactly the threshold then is named as often as the test has
#: power, rather than the half of the time that asking the estimate to pass
#: the threshold itself would give; a significant drift of 1-2% between two
#: runs of one build (host load, heat) is not called a regression.
NAMED_SHARE_OF_THRESHOLD = 0.5


def judge(ratio: float, low: float, high: float, p_value: float, *, threshold: float,
          alpha: float, ci_name: str = "CI") -> tuple[Verdict, str]:
    """The verdict and its reason, by the three-way rule of :func:`farm.stats.compare_samples`.

    Args:
        ratio: the estimate, B over A.
        low: the lower end of its interval.
        high: the upper end of its interval.
        p_value: the test's p-value.
        threshold: the smallest relative change that counts (0.05 = 5%).
        alpha: the p-value a change must be below.
        ci_name: how the reason names the interval (``CI``, ``99% CI``).
    """
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
