"""An ONNX model's tunable tasks: extracted, ranked, and committed to the work folder.

The model goes ONNX -> Relax -> fused TIR functions exactly as the ``model``
job compiles it (:func:`farm.jobs.model.relax_module`,
:func:`farm.jobs.model.tunable_module`: the passes ``compile_relax`` runs before
it applies a database), so the tasks extracted here are the workloads the
tuned build looks up. Tasks are ranked heaviest first by their estimated share
of the model's time (:attr:`ModelTask.cost`); :func:`plan_tasks` caps them at
``max_tasks``, plans each one's trials (:func:`farm.tuning.search.plan_trials`)
and commits the workload of each task with trials to the work folder's database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from farm.errors import CompileError, SpecError
from farm.jobs.model import ModelInput, load_model, relax_module, tunable_module
from farm.jobs.params import ModelParams, TuneParams
from farm.jobs.tuning_db import open_database, workload_index
from farm.tuning.search import plan_trials

__all__ = ["RIDGE_FLOP_PER_BYTE", "ModelTask", "Planned", "argument_bytes", "import_model",
           "model_of", "model_tasks", "plan_tasks"]


#: FLOPs one CPU core does in the time it moves one byte to or from memory: the
#: ridge point of its roofline. Measured on a 16-core Xeon host's core with
#: MobileNetV2's kernels (docs/benchmarks.md's history): its channel-block copies moved
#: 12 GB/s and its best convolutions ran 30-70 GFLOPS, a ridge of 3-5; a phone's
#: big core (about 20-40 GFLOPS fp32, 10-15 GB/s) is in the same range.
RIDGE_FLOP_PER_BYTE = 4.0


@dataclass(frozen=True)
class ModelTask:
    """One tunable task of a model.

    Attributes:
        name: MetaSchedule's task name, e.g. ``"fused_conv2d_add_relu"``.
        weight: how many times the model calls it.
        flop: floating point operations of one call (``estimate_tir_flops``).
        extracted: MetaSchedule's ``ExtractedTask``.
        bytes: bytes of its arguments (inputs and outputs) one call reads or writes.
    """

    name: str
    weight: int
    flop: float
    extracted: Any
    bytes: float = 0.0

    @property
    def cost(self) -> float:
        """The model's time in this task, in FLOPs at the core's peak (a roofline estimate).

        ``weight x max(flop, RIDGE_FLOP_PER_BYTE x bytes)``: a convolution is
        bound by its FLOPs, a depthwise convolution, a copy into channel
        blocks or a matrix-vector product by the bytes it moves. By FLOPs
        alone MobileNetV2's seven channel-block copies (2.0 of its 16.4 ms on
        that Xeon) counted as nothing and got one trial each.
        """
        return self.weight * max(self.flop, RIDGE_FLOP_PER_BYTE * self.bytes)


def argument_bytes(mod: Any) -> float:
    """Bytes of the arguments of ``mod``'s functions: what one call reads and writes at least.

    Symbolic dimensions count as 1.
    """
    import tvm

    total = 0.0
    for func in mod.functions.values():
        for param in getattr(func, "params", ()):
            size = 1
            for dim in getattr(param, "shape", ()):
                if isinstance(dim, tvm.tirx.IntImm):
                    size *= int(dim)
            total += size * tvm.DataType(param.dtype).bits // 8
    return total


@dataclass(frozen=True)
class Planned:
    """A task in this run: its workload line, its planned trials and its workload's hash."""

    task: ModelTask
    index: int
    trials: int
    shash: str


def model_of(params: TuneParams) -> ModelParams:
    """The tuning's model.

    Raises:
        SpecError: the parameters name no model.
    """
    if params.model is None:
        raise SpecError("params.model", "tuning a model needs a model")
    return params.model


def import_model(model: ModelParams) -> tuple[Any, list[ModelInput]]:
    """The model as a Relax ``IRModule`` and its inputs (:func:`farm.jobs.model.relax_module`).

    Raises:
        SpecError: the file or the shapes are invalid.
        CompileError: the frontend cannot import the model, even simplified.
    """
    onnx_model, inputs = load_model(model.model_path, model.input_shapes, model.shown_name)
    return relax_module(onnx_model, inputs, model.shown_name), inputs


def model_tasks(mod: Any, target: dict[str, Any]) -> list[ModelTask]:
    """The model's tunable tasks, heaviest (:attr:`ModelTask.cost`) first.

    Args:
        mod: the model's Relax module (:func:`farm.jobs.model.relax_module`).
        target: the target dict.

    Returns:
        Every task; ties keep MetaSchedule's order.
    """
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops
    from tvm.s_tir.meta_schedule.relax_integration import extract_tasks

    target_obj = tvm.target.Target(target)
    with tvm.transform.PassContext(opt_level=3):
        fused = tunable_module(mod, target_obj)
    tasks = [ModelTask(str(t.task_name), int(t.weight), float(estimate_tir_flops(t.dispatched[0])),
                       t, argument_bytes(t.dispatched[0]))
             for t in extract_tasks(fused, target_obj)]
    return sorted(tasks, key=lambda t: -t.cost)


def _task_workload(task: ModelTask, params: TuneParams) -> tuple[int, str]:
    """Commit the task's workload to the database (if new); return its line and structural hash.

    The workload is the module MetaSchedule tunes (``dispatched[0]``, what
    ``extracted_tasks_to_tune_contexts`` gives its ``TuneContext``).
    """
    database = open_database(params.work_dir)
    shash = str(database.commit_workload(task.extracted.dispatched[0]).as_json()[0])
    index = workload_index(params.work_dir, shash)
    if index is None:  # commit_workload writes the line before it returns
        raise CompileError(task.name, "its workload is missing from the tuning database")
    return index, shash


def plan_tasks(mod: Any, target: dict[str, Any], params: TuneParams
               ) -> tuple[list[Planned], int, int]:
    """The heaviest ``max_tasks`` tasks with trials planned, the batch size, the model's tasks.

    Args:
        mod: the model's Relax module.
        target: the target dict.
        params: ``trials``, ``trials_per_iter``, ``trials_per_task``,
            ``max_tasks`` and the work folder.

    Returns:
        Each task with trials, its workload committed to the work folder's
        database; the trials per batch (``num_trials_per_iter``); and how many
        tasks the model has (fewer trials than tasks plan only the heaviest, so
        the tasks tuned are not the model's count: one model once showed 32
        tasks in one job and 55 in another).

    Raises:
        CompileError: a task's workload is missing from the database once committed.
    """
    every = model_tasks(mod, target)
    tasks = every[: params.max_tasks]
    plan, batch = plan_trials([t.cost for t in tasks], params.trials,
                              params.trials_per_iter, params.trials_per_task)
    planned = []
    for t, n in zip(tasks, plan, strict=True):
        if n > 0:
            index, shash = _task_workload(t, params)
            planned.append(Planned(t, index, n, shash))
    return planned, batch, len(every)
