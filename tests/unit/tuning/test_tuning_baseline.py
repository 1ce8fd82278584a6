"""A task's default schedule as a tuning record: the tuned build keeps it unless a candidate won."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from farm.jobs.cpu_schedules.build import scheduled_module
from farm.tuning.baseline import BaselineTask, baseline_candidate, missing_baselines
from farm.tuning.model import model_tasks

TARGET = {"kind": "llvm", "num-cores": 1}


def _matmul_model() -> Any:
    """A Relax model of one dense layer: x[8, 32] @ w[32, 16]."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((8, 32), "float32"))
    weight = relax.const(np.random.default_rng(0).random((32, 16), dtype="float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.matmul(x, weight)))
        bb.emit_func_output(out)
    return bb.get()


def _searched(workload: Any) -> Any:
    """A schedule MetaSchedule might have measured: the output loop split by 4, nothing else."""
    sch = tvm.s_tir.Schedule(workload)
    loop = sch.get_loops(sch.get_child_blocks(sch.get_sblock("root"))[0])[0]
    sch.split(loop, factors=[None, 4])
    return sch


def _commit(database: Any, workload: Any, sch: Any, run_s: float) -> None:
    args_info = ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True)
    database.commit_tuning_record(ms.database.TuningRecord(
        sch.trace, database.commit_workload(workload), [run_s],
        tvm.target.Target(TARGET), args_info))


def _same(built: Any, sch: Any) -> bool:
    try:
        tvm.ir.assert_structural_equal(built.body, sch.mod["main"].body, map_free_vars=True)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(("baseline_s", "searched_s", "applied"), [
    (1e-3, 2e-3, "baseline"),
    (2e-3, 1e-3, "searched"),
])
def test_the_tuned_build_applies_a_record_only_where_it_beat_the_default(
    tmp_path: Path, baseline_s: float, searched_s: float, applied: str,
) -> None:
    """The task's default schedule and a searched candidate are both recorded; the build takes
    whichever measured faster, so a slow candidate never replaces the default schedule."""
    mod, target = _matmul_model(), tvm.target.Target(TARGET)
    [task] = model_tasks(mod, TARGET)
    workload = task.extracted.dispatched[0]
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    baseline = baseline_candidate(workload, target).sch
    searched = _searched(workload)
    _commit(database, workload, baseline, baseline_s)
    _commit(database, workload, searched, searched_s)

    built = scheduled_module(mod, target, ms.database.JSONDatabase(work_dir=str(tmp_path)))
    [func] = [f for f in built.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    want, other = (baseline, searched) if applied == "baseline" else (searched, baseline)
    assert _same(func, want) and not _same(func, other)


def test_a_baseline_is_missing_until_a_measurement_of_it_is_recorded(tmp_path: Path) -> None:
    """A failed measurement of the default schedule (1e10 s) leaves it to measure again."""
    [task] = model_tasks(_matmul_model(), TARGET)
    workload, target = task.extracted.dispatched[0], tvm.target.Target(TARGET)
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    index = 0  # the first workload line
    tasks = [BaselineTask(task.name, index, workload, target)]
    assert missing_baselines(tasks, tmp_path) == tasks
    baseline = baseline_candidate(workload, target).sch
    _commit(database, workload, _searched(workload), 1e-3)
    _commit(database, workload, baseline, 1e10)
    assert missing_baselines(tasks, tmp_path) == tasks
    _commit(database, workload, baseline, 1e-3)
    assert missing_baselines(tasks, tmp_path) == []


def test_a_gpu_tasks_baseline_is_dlights_schedule_and_replays_on_its_workload() -> None:
    """On a GPU target the baseline is the untuned build's dlight schedule: every loop of the
    kernel bound to blocks and threads, and its trace, as the tuning record keeps it, gives
    the same kernel again (which the tuned build replays). No GPU is needed to schedule."""
    gpu = {"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 1024,
           "max_num_threads": 1024, "thread_warp_size": 32}
    [task] = model_tasks(_matmul_model(), gpu)
    workload, target = task.extracted.dispatched[0], tvm.target.Target(gpu)
    sch = baseline_candidate(workload, target).sch
    assert "threadIdx.x" in sch.mod.script() and "blockIdx.x" in sch.mod.script()

    replayed = tvm.s_tir.Schedule(workload)
    sch.trace.apply_to_schedule(replayed, remove_postproc=False)
    tvm.ir.assert_structural_equal(replayed.mod, sch.mod)
