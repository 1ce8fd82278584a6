"""The one backoff rule of farm: exponential, capped, no jitter.

Used by the recovery ladder (:mod:`farm.supervise.ladder`) and the queue's
retry of a job (``farm.queue.lifecycle``); each passes its own base and cap
from the config.
"""

from __future__ import annotations

__all__ = ["backoff_s"]


def backoff_s(failures: int, base_s: float, max_s: float) -> float:
    """The wait after ``failures`` failures, in seconds.

    0 s before the first retry (``failures <= 0``: a crashed app is restarted at
    once), then ``base_s * 2**(failures - 1)`` capped at ``max_s``: with base 2
    and cap 300 the waits are 0, 2, 4, 8, ..., 128, 256, 300, 300 ... No jitter:
    each phone recovers against its own hardware, and the only shared service
    (the tracker) takes one registration per phone, so synchronised retries
    cannot stampede.

    Args:
        failures: failures so far, any integer (<= 0 means none).
        base_s: the first non-zero wait, > 0.
        max_s: the cap on any wait, >= ``base_s``.

    Returns:
        Seconds to wait, never decreasing in ``failures``, never above ``max_s``.
    """
    if failures <= 0:
        return 0.0
    # 2.0 ** 1000 is finite; base times it may be inf, which min() caps.
    return min(base_s * 2.0 ** min(failures - 1, 1000), max_s)
