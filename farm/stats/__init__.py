"""Pure statistics of timings: a result's spread, and the verdict between two builds.

Lists of floats in, frozen dataclasses out; scipy does the statistics, farm
chooses them and the verdict rule. The modules, one job each:

- :mod:`farm.stats.verdict`: the three-way verdict (slower, faster, no
  change, undecided) and :class:`Comparison`;
- :mod:`farm.stats.samples`: one set's :func:`spread` and two sets'
  :func:`compare_samples` (``farmctl compare``, the regression watch);
- :mod:`farm.stats.rounds`: two builds timed in turns, :func:`compare_rounds`
  (the A/B job).
"""

from farm.stats.rounds import MIN_PAIRED_ROUNDS, compare_rounds
from farm.stats.samples import (
    Spread,
    compare_samples,
    least_p_value,
    robust_cv,
    samples_for_alpha,
    spread,
)
from farm.stats.verdict import NAMED_SHARE_OF_THRESHOLD, Comparison, Verdict

__all__ = [
    "MIN_PAIRED_ROUNDS",
    "NAMED_SHARE_OF_THRESHOLD",
    "Comparison",
    "Spread",
    "Verdict",
    "compare_rounds",
    "compare_samples",
    "least_p_value",
    "robust_cv",
    "samples_for_alpha",
    "spread",
]
