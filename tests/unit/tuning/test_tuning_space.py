"""A CPU task's design space holds farm's default schedule: its random samples run and apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from farm.jobs.cpu_schedules.build import scheduled_module
from farm.tuning.model import model_tasks
from farm.tuning.space import tune_space

TARGET = {"kind": "llvm", "num-cores": 1}


def _conv_model() -> Any:
    """A Relax model of one 3x3 conv, 8 -> 64 channels on 6 x 8 pixels, with its ReLU."""
    rng = np.random.default_rng(0)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 6, 8), "float32"))
    weight = relax.const(rng.standard_normal((64, 8, 3, 3)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = bb.emit(relax.op.nn.conv2d(x, weight, padding=1))
            out = bb.emit_output(bb.emit(relax.op.nn.relu(conv)))
        bb.emit_func_output(out)
    return bb.get()


def _farm_made(sch: Any) -> bool:
    """Whether the trace is farm's rule's (it starts by listing the root's blocks)."""
    return sch.trace.insts[1].kind.name == "GetChildBlocks"


def _candidates(workload: Any, target: Any) -> tuple[list[Any], list[Any]]:
    """(design spaces, a first batch of 8 candidates) of MetaSchedule's evolutionary search."""
    from farm.jobs.tvmscript import TENSOR_INTRIN, import_light

    import_light(TENSOR_INTRIN)  # what TuneContext imports, in seconds rather than a minute
    context = ms.TuneContext(
        mod=workload, target=target, space_generator=tune_space(target),
        search_strategy=ms.search_strategy.EvolutionarySearch(
            population_size=16, init_measured_ratio=0.0, init_min_unmeasured=16,
            genetic_num_iters=1),
        task_name="conv", rand_state=3, num_threads=1)
    spaces = context.generate_design_space()
    context.pre_tuning(max_trials=8, num_trials_per_iter=8, design_spaces=spaces,
                       database=ms.database.MemoryDatabase(),
                       cost_model=ms.cost_model.RandomModel(seed=0))
    return spaces, list(context.generate_measure_candidates() or [])


def _output(mod: Any, target: Any) -> np.ndarray:
    """The task's output on random arguments (the same every call)."""
    rng = np.random.default_rng(1)
    shapes = [[int(d) for d in arg.shape]
              for arg in ms.arg_info.ArgInfo.from_entry_func(mod, remove_preproc=True)]
    arrays = [tvm.runtime.tensor(rng.standard_normal(s).astype("float32")) for s in shapes]
    tvm.compile(mod, target=target)["main"](*arrays)
    return arrays[-1].numpy()


def test_farm_s_schedule_is_searched_with_random_knobs_and_its_records_apply(
    tmp_path: Path,
) -> None:
    """The conv's space holds MetaSchedule's spaces and farm's; the first batch drawn from it
    has farm's tile with knob values other than the default's, each giving the conv's
    numbers; a record of one is what the tuned build applies to the task."""
    mod, target = _conv_model(), tvm.target.Target(TARGET)
    [task] = model_tasks(mod, TARGET)
    workload = task.extracted.dispatched[0]
    spaces, candidates = _candidates(workload, target)
    assert sum(map(_farm_made, spaces)) == 1 and len(spaces) > 1
    default = next(s for s in spaces if _farm_made(s))
    farm = [c for c in candidates if _farm_made(c.sch)]
    assert farm, "no candidate drawn from farm's space"

    def knobs(sch: Any) -> list[list[int]]:
        return [[int(f) for f in sch.trace.decisions[inst]] for inst in sch.trace.insts
                if inst.kind.name == "SamplePerfectTile"]

    assert any(knobs(c.sch) != knobs(default) for c in farm)
    want = _output(workload, target)
    for candidate in farm[:3]:
        np.testing.assert_allclose(_output(candidate.sch.mod, target), want, rtol=1e-5,
                                   atol=1e-5)

    picked = farm[0].sch
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    database.commit_tuning_record(ms.database.TuningRecord(
        picked.trace, database.commit_workload(workload), [1e-4], target,
        ms.arg_info.ArgInfo.from_entry_func(picked.mod, remove_preproc=True)))
    built = scheduled_module(mod, target, ms.database.JSONDatabase(work_dir=str(tmp_path)))
    [func] = [f for f in built.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    tvm.ir.assert_structural_equal(func.body, picked.mod["main"].body, map_free_vars=True)


def test_a_task_without_knobs_gets_no_farm_space() -> None:
    """An elementwise task: farm's schedule of it samples nothing, so only MetaSchedule's."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 32), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.relu(relax.op.add(x, x))))
        bb.emit_func_output(out)
    [task] = model_tasks(bb.get(), TARGET)
    target = tvm.target.Target(TARGET)
    context = ms.TuneContext(mod=task.extracted.dispatched[0], target=target,
                             space_generator=tune_space(target), task_name="relu")
    assert not any(map(_farm_made, context.generate_design_space()))
