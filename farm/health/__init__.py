"""Phone health: samples from the probes, and pure verdicts on them.

``sample.py`` holds :class:`HealthSample`; ``verdict.py`` judges it against
:class:`Limits` with :func:`verdict` and gates cooling with :func:`cool_enough`.
"""

from farm.health.sample import HealthSample
from farm.health.verdict import (
    Condition,
    Limits,
    Verdict,
    app_down,
    app_failure_reasons,
    cool_enough,
    verdict,
)

__all__ = [
    "Condition",
    "HealthSample",
    "Limits",
    "Verdict",
    "app_down",
    "app_failure_reasons",
    "cool_enough",
    "verdict",
]
