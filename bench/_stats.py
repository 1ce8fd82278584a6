"""The one percentile every bench script reports (import as ``from _stats import percentile``).

The scripts run as ``python bench/<script>.py``, so ``bench/`` is on ``sys.path``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: int) -> float:
    """The ``q``-th percentile (integer, 1..99) of ``values``, in their unit.

    Linear interpolation between the closest ranks (``statistics.quantiles``
    with ``method="inclusive"``, numpy's default): p50 is the median. A single
    value is every percentile of itself. Raises ``ValueError`` for no values
    or ``q`` outside 1..99.
    """
    if not 1 <= q <= 99:
        raise ValueError(f"percentile q must be in 1..99, got {q}")
    if not values:
        raise ValueError("percentile of no values")
    if len(values) == 1:
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
