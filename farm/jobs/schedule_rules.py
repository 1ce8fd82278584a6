"""One PrimFunc scheduled by the first of a list of dlight rules that applies to it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["first_rule_schedule"]


def first_rule_schedule(rules: Sequence[Any], func: Any, target: Any) -> Any:
    """``func`` scheduled by the first of ``rules`` that applies, as dlight picks.

    dlight's ``ApplyDefaultSchedule`` tries its rules in order on each function
    and keeps the first schedule one returns (apache/tvm
    ``python/tvm/s_tir/dlight/base/transform.py``); this does the same for one
    function and keeps the schedule, whose trace replays it on the same
    function (how a tuning job records a default schedule as a candidate,
    :mod:`farm.tuning.baseline`).

    Args:
        rules: dlight ``ScheduleRule`` objects, in order.
        func: a ``tirx.PrimFunc``.
        target: the ``tvm.target.Target`` of the build.

    Returns:
        A traced ``tvm.s_tir.Schedule`` of ``func``; with no trace step where
        no rule applies.
    """
    from tvm import s_tir

    with target:
        for rule in rules:
            space = rule.apply(func, target, False)
            if space is not None:
                return space[0] if isinstance(space, list) else space
    return s_tir.Schedule(func)
