"""Default CPU schedules for the untuned build, in dlight's rule form.

:func:`apply_default_schedules` runs after a MetaSchedule database has been
applied, so tuning records take precedence: dlight skips functions marked
``tirx.is_scheduled``, which ``MetaScheduleApplyDatabase`` sets on every
function it replaced.
"""

from __future__ import annotations

from typing import Any

from farm.jobs.cpu_schedules.row_norm import RowNorm
from farm.jobs.cpu_schedules.row_reduction import RowReduction
from farm.jobs.cpu_schedules.rules import Injective, ParallelFallback, TiledReduction

__all__ = ["CPU_SCHEDULES_VERSION", "Injective", "ParallelFallback", "RowNorm", "RowReduction",
           "TiledReduction", "apply_default_schedules", "default_rules", "default_schedule"]

#: Joins the compile cache key of CPU builds: bump it when a rule changes what it emits,
#: so libraries built by older rules are not reused.
CPU_SCHEDULES_VERSION = "17"


def default_rules() -> list[Any]:
    """The rules in the order they are tried; the first that applies schedules a function.

    :class:`RowReduction` goes first: it takes only a reduction with no output
    axis to vectorize (a global average pool), which :class:`TiledReduction`
    would run as one scalar add after another.

    farm's :class:`TiledReduction` goes before ``dlight.cpu.Reduction``, which
    would otherwise claim a convolution with its epilogue (it takes any mix of
    reduction and injective blocks) and leave the multiply-accumulate loop
    scalar. :class:`RowNorm` takes softmax and layer norm (several reductions
    over each row's last axis) before ``dlight.cpu.Reduction``, which runs each
    reduction as scalar ops; ``Reduction`` keeps what ``RowNorm`` refuses (a row
    that is not whole vectors long). ``GEMV`` is not used: for batch-1 dense layers the tiled
    rule's vector over output columns is as fast and its check is simpler.
    """
    from tvm.s_tir import dlight

    return [RowReduction(), TiledReduction(), Injective(), RowNorm(), dlight.cpu.Reduction(),
            ParallelFallback()]


def default_schedule(func: Any, target: Any) -> Any:
    """farm's default schedule of one PrimFunc, as :func:`apply_default_schedules` gives it.

    The first of :func:`default_rules` that applies schedules it, as dlight's
    ``ApplyDefaultSchedule`` picks (apache/tvm ``python/tvm/s_tir/dlight/base/
    transform.py``); its trace replays the schedule on the same function,
    which is how a tuning job records it as a candidate
    (:mod:`farm.tuning.baseline`).

    Args:
        func: a ``tirx.PrimFunc``, e.g. a tuning task's ``main``.
        target: the ``tvm.target.Target`` of the build.

    Returns:
        A traced ``tvm.s_tir.Schedule`` of ``func``; with no trace step where
        no rule applies (the function stays as legalization wrote it).
    """
    from farm.jobs.schedule_rules import first_rule_schedule

    return first_rule_schedule(default_rules(), func, target)


def apply_default_schedules(mod: Any, target: Any) -> Any:
    """``mod`` with every PrimFunc not yet scheduled given farm's default CPU schedule.

    Args:
        mod: a fused Relax module (after ``FuseTIR``, and after
            ``MetaScheduleApplyDatabase`` where there is a database).
        target: the ``tvm.target.Target`` of the build.

    Returns:
        The module, scheduled functions marked ``tirx.is_scheduled``.
    """
    from tvm.s_tir import dlight

    with target:
        return dlight.ApplyDefaultSchedule(*default_rules())(mod)
