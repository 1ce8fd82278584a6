"""Default GPU schedules for the untuned build: dlight's GPU rules.

A GPU kernel needs its loops bound to blocks and threads before it builds;
TVM's ``dlight.gpu`` rules give every function a schedule that binds them
(apache/tvm ``python/tvm/s_tir/dlight/gpu``), tried in the order below, the
first that applies wins (``ApplyDefaultSchedule``). farm writes no GPU
schedule of its own: the untuned build, a tuning job's first trial of each
task (:mod:`farm.tuning.baseline`) and the tuned build's tasks without a
record all use these.
"""

from __future__ import annotations

from typing import Any

__all__ = ["apply_default_schedules", "default_rules", "default_schedule"]


def default_rules() -> list[Any]:
    """dlight's GPU rules, most specific first (``dlight.gpu.Fallback`` binds anything)."""
    from tvm.s_tir import dlight

    return [dlight.gpu.Matmul(), dlight.gpu.GEMV(), dlight.gpu.Reduction(),
            dlight.gpu.GeneralReduction(), dlight.gpu.Fallback()]


def default_schedule(func: Any, target: Any) -> Any:
    """The default GPU schedule of one PrimFunc, as :func:`apply_default_schedules` gives it.

    Args:
        func: a ``tirx.PrimFunc``, e.g. a tuning task's ``main``.
        target: a GPU ``tvm.target.Target`` (``cuda``, ``opencl``, ``vulkan``).

    Returns:
        A traced ``tvm.s_tir.Schedule`` of ``func`` whose trace replays the
        schedule; with no step where no rule applies (that function does not
        build for a GPU).
    """
    from farm.jobs.schedule_rules import first_rule_schedule

    return first_rule_schedule(default_rules(), func, target)


def apply_default_schedules(mod: Any, target: Any) -> Any:
    """``mod`` with every PrimFunc not yet scheduled given its default GPU schedule.

    Args:
        mod: a fused Relax module.
        target: the GPU ``tvm.target.Target`` of the build.
    """
    from tvm.s_tir import dlight

    with target:
        return dlight.ApplyDefaultSchedule(*default_rules())(mod)
