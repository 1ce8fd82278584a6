"""The design space a CPU task is searched in: MetaSchedule's own and farm's default schedule.

MetaSchedule's evolutionary search starts each round from a population drawn
from the task's design spaces, each trace replayed with its sampled decisions
dropped (``EvolutionarySearch``'s ``SampleInitPopulation``: ``Trace(insts,
{})``, apache/tvm ``src/s_tir/meta_schedule/search_strategy/
evolutionary_search.cc``), and from the database's measured bests. With only
MetaSchedule's generic x86 space (``post-order-apply``), farm's default
schedule entered the search as one measured trace
(:mod:`farm.tuning.baseline`), and the candidates built on it were only
its mutants; on the device runs 0-5 of 7-15 checked picks beat it.

Here a CPU task's space is the union (``SpaceGeneratorUnion``) of
``post-order-apply`` and a ``ScheduleFn`` that applies farm's default rules
(:func:`farm.jobs.cpu_schedules.default_schedule`). That schedule's splits
are sampled perfect tiles (the register tile's vector width, rows and
channel blocks: :mod:`farm.jobs.cpu_schedules.rules`), so each random member
of the population drawn from it is farm's structure with random knob values,
the way AutoTVM's templates have knobs. A task no farm rule tiles (no
sampled instruction in its default's trace) gets no farm space: its default
is one fixed schedule, measured already.
"""

from __future__ import annotations

from typing import Any

__all__ = ["farm_schedules", "tune_space"]


def farm_schedules(target: Any) -> Any:
    """A ``ScheduleFn`` body: the task's farm default schedule, if it has knobs.

    Args:
        target: the task's ``tvm.target.Target`` (kind ``llvm``).

    Returns:
        A function of a MetaSchedule ``Schedule`` of the task to a list of
        schedules: farm's default schedule of its ``main`` (whose trace replays
        on the task's module: :mod:`farm.tuning.baseline` records it so), or
        none where that trace samples nothing.
    """
    from farm.jobs.cpu_schedules import default_schedule

    def schedules(sch: Any) -> list[Any]:
        default = default_schedule(sch.mod["main"], target)
        if not any(inst.kind.name.startswith("Sample") for inst in default.trace.insts):
            return []
        return [default]

    return schedules


def tune_space(target: Any) -> Any:
    """The space generator of a task of ``target``: the union above for CPU, else MetaSchedule's.

    Args:
        target: the task's ``tvm.target.Target``.

    Returns:
        A ``SpaceGenerator``, or ``"post-order-apply"`` for a non-CPU target.
    """
    from tvm.s_tir.meta_schedule import space_generator

    if str(target.kind.name) != "llvm":
        return "post-order-apply"
    return space_generator.SpaceGeneratorUnion([
        space_generator.PostOrderApply(),
        space_generator.ScheduleFn(farm_schedules(target)),
    ])
