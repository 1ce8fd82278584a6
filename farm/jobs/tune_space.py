"""The design space a CPU task is searched in: MetaSchedule's own and farm's default schedule.

MetaSchedule's evolutionary search starts each round from a population drawn
from the task's design spaces, each trace replayed with its sampled decisions
dropped (``EvolutionarySearch``'s ``SampleInitPopulation``: ``Trace(insts,
{})``, apache/tvm ``src/s_tir/meta_schedule/search_strategy/
evolutionary_search.cc``), and from the database's measured bests. With only
MetaSchedule's generic x86 space (``post-order-apply``), farm's default
schedule entered the search as one measured trace
(:mod:`farm.jobs.tune_baseline`), and the candidates built on it were only
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

On a target of one core (``num-cores`` 1, the virtual phones and a job that
times one big core) MetaSchedule's own space makes no parallel loop
(``ParallelizeVectorizeUnroll`` with ``max_jobs_per_core`` -1, its switch),
as farm's default rules make none there
(:func:`farm.jobs.cpu_schedules.common.parallel`): with one thread, a
parallel loop is a thread-pool launch for nothing, about 6.5 us a kernel on
this host's AVX-512 core, which lost MetaSchedule's candidates the check
against farm's defaults on the small kernels (det_head's are 4-150 us).
"""

from __future__ import annotations

from typing import Any

__all__ = ["farm_schedules", "post_order_apply", "target_rules", "tune_space"]


def farm_schedules(target: Any) -> Any:
    """A ``ScheduleFn`` body: the task's farm default schedule, if it has knobs.

    Args:
        target: the task's ``tvm.target.Target`` (kind ``llvm``).

    Returns:
        A function of a MetaSchedule ``Schedule`` of the task to a list of
        schedules: farm's default schedule of its ``main`` (whose trace replays
        on the task's module: :mod:`farm.jobs.tune_baseline` records it so), or
        none where that trace samples nothing.
    """
    from farm.jobs.cpu_schedules import default_schedule

    def schedules(sch: Any) -> list[Any]:
        default = default_schedule(sch.mod["main"], target)
        if not any(inst.kind.name.startswith("Sample") for inst in default.trace.insts):
            return []
        return [default]

    return schedules


def target_rules(target: Any) -> list[Any]:
    """MetaSchedule's schedule rules for ``target``, as its ``"from-target"`` chooses them.

    The choice (LLVM's, AVX-512's, VNNI's, NEON's rules, by the target's
    features) lives in C++ (``GetRuleKindFromTarget``, apache/tvm
    ``src/s_tir/meta_schedule/space_generator/space_generator.cc``) and is not
    exported, so a scratch ``TuneContext`` on a one-element copy resolves it.
    """
    from tvm import IRModule, te
    from tvm.s_tir import meta_schedule as ms

    x = te.placeholder((1,), name="x")
    scratch = te.create_prim_func([x, te.compute((1,), lambda i: x[i], name="y")])
    context = ms.TuneContext(mod=IRModule({"main": scratch}), target=target,
                             space_generator=ms.space_generator.PostOrderApply(),
                             task_name="rules", num_threads=1)
    return list(context.space_generator.sch_rules)


def _serial(rule: Any) -> Any:
    """``rule``, or its copy that annotates no parallel loop where it is the one that does."""
    from tvm.s_tir.meta_schedule.schedule_rule import ParallelizeVectorizeUnroll

    if not isinstance(rule, ParallelizeVectorizeUnroll):
        return rule
    return ParallelizeVectorizeUnroll(
        max_jobs_per_core=-1, max_vectorize_extent=int(rule.max_vectorize_extent),
        unroll_max_steps=[int(n) for n in rule.unroll_max_steps],
        unroll_explicit=bool(rule.unroll_explicit))


def post_order_apply(target: Any) -> Any:
    """MetaSchedule's own space for ``target``: its rules, serial on a one-core target."""
    from tvm.s_tir.meta_schedule import space_generator

    from farm.jobs.cpu_schedules.common import target_cores

    if target_cores(target) != 1:
        return space_generator.PostOrderApply()
    return space_generator.PostOrderApply(
        sch_rules=[_serial(rule) for rule in target_rules(target)])


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
        post_order_apply(target),
        space_generator.ScheduleFn(farm_schedules(target)),
    ])
