"""The ``tune`` kind: MetaSchedule tuning of a gemm, or of an ONNX model, across the job's phones.

A tuning job's phones serve the job's tracker key for its whole run, app crashes
healed, and go back to their own keys after it: the attempt asks and farmd's
fleet serves (:mod:`farm.kinds.serve_keys`, :mod:`farm.fleet.serving`).
Its retries reuse one work folder (:func:`farm.jobs.tuning_db.tune_work_dir`),
so tuning resumes where the last attempt stopped. A model's tasks are tuned
together in one run (:mod:`farm.tuning.model`); at the end each phone times
it untuned and tuned.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click
from pydantic import Field, model_validator

from farm.click_types import Seconds
from farm.controllers.base import ANDROID, BOARD, GPU
from farm.errors import SpecError
from farm.kinds.base import EnqueueCommand, Kind, TimedModel, default_of
from farm.kinds.gemm import GEMM_FLAGS, GEMM_OPTIONS, GemmSpec, gemm_params
from farm.kinds.gemm import workload as gemm_workload
from farm.kinds.model import ModelSpec, parse_input_shape, shown_name
from farm.queue.capabilities import workload_needs
from farm.queue.spec import MAX_PHONES, FieldError, JobBase, Strict

#: The kinds whose controllers serve a job's key (farm.controllers): android
#: (no kind means android), board, gpu; a device behind the RPC proxy serves only
#: the key it registered.
TUNABLE_KINDS = (ANDROID, BOARD, GPU)

if TYPE_CHECKING:
    from farm.jobs.params import GemmParams, TuneParams
    from farm.kinds.run import RunContext
    from farm.queue.capabilities import Requirements
    from farm.queue.records import Outcome, SnapshotData, TuningData
    from farm.queue.store import Store
    from farm.tuning import TuneProgress
    from farm.tuning.gemm import TuneResult

__all__ = ["KIND", "MAX_TASKS", "MAX_TRIALS", "GemmTuning", "TuneJob", "TuneModelSpec",
           "TuneSpec", "tune_gemm_on"]

#: Measured trials per job at most: MetaSchedule on a phone measures a few per
#: second at best, so 100,000 is already more than a day of one phone.
MAX_TRIALS = 100_000


#: Tasks per tuned model at most (a large detector has a few hundred).
MAX_TASKS = 10_000

#: A model's time budget at most: a week.
MAX_FOR_S = 7 * 24 * 3600.0


class TuneModelSpec(ModelSpec):
    """An ONNX model to tune: the model job's fields, and the processor that runs it."""

    target: Literal["cpu", "opencl", "cuda"] = "cpu"


class TuneSpec(Strict):
    """MetaSchedule tuning of exactly one workload: ``gemm``, or ``model``'s tasks.

    ``trials_per_task`` and ``max_tasks`` cap a model's work: ``trials`` is
    shared over its ``max_tasks`` heaviest tasks by their estimated share of
    the model's time (FLOPs or bytes moved, a roofline), a small floor each,
    at most ``trials_per_task`` each
    (:func:`farm.tuning.search.plan_trials`). ``for_s`` bounds a model's
    tune job by time as well (seconds over all attempts, each from its start
    in the queue to its result: :mod:`farm.tuning.run`). Unset, ``trials`` and
    ``for_s`` come from the config (``[jobs]`` ``tune_model_trials``,
    ``tune_model_for_s``, ``tune_gemm_trials``).
    """

    gemm: GemmSpec | None = None
    model: TuneModelSpec | None = None
    trials: int | None = Field(default=None, ge=1, le=MAX_TRIALS)
    trials_per_batch: int = Field(default=16, ge=1, le=MAX_TRIALS)
    phones: int = Field(default=1, ge=1, le=MAX_PHONES)  # phones measuring candidates in parallel
    trials_per_task: int | None = Field(default=None, ge=1, le=MAX_TRIALS)
    max_tasks: int | None = Field(default=None, ge=1, le=MAX_TASKS)
    for_s: float | None = Field(default=None, gt=0, le=MAX_FOR_S)

    @model_validator(mode="after")
    def _one_workload(self) -> TuneSpec:
        if (self.gemm is None) == (self.model is None):
            raise FieldError("gemm", "give exactly one workload: gemm or model")
        for name in ("trials_per_task", "max_tasks", "for_s"):
            if self.model is None and getattr(self, name) is not None:
                raise FieldError(name, "applies to tuning a model only")
        if self.trials is None:
            return self
        if "trials_per_batch" not in self.model_fields_set:
            object.__setattr__(self, "trials_per_batch", min(self.trials_per_batch, self.trials))
        elif self.trials_per_batch > self.trials:
            raise FieldError("trials_per_batch", f"must not exceed trials={self.trials}")
        return self


class TuneJob(JobBase):
    """Tune a workload; ``params.phones`` is how many phones the job holds."""

    kind: Literal["tune"]
    params: TuneSpec

    @model_validator(mode="after")
    def _kind_serves_keys(self) -> TuneJob:
        """No ``--kind`` means ``android``; a kind that cannot serve the job's key is refused.

        farmd's fleet serves the job's key on the held devices through their
        controllers (:mod:`farm.fleet.serving`): phones, boards and GPU hosts.
        Without a kind a mixed fleet could plan a tune onto devices of
        different kinds, whose candidates MetaSchedule must not mix.
        """
        if self.devices.kind is None:
            devices = self.devices.model_copy(update={"kind": ANDROID})
            object.__setattr__(self, "devices", devices)
        elif self.devices.kind not in TUNABLE_KINDS:
            raise FieldError("devices.kind", f"tune runs on {', '.join(TUNABLE_KINDS)} "
                             f"devices, not {self.devices.kind!r}: only their servers "
                             "can serve the job's tracker key")
        return self

    @model_validator(mode="after")
    def _count_is_phones(self) -> TuneJob:
        if "count" in self.devices.model_fields_set and self.devices.count != self.params.phones:
            raise FieldError(
                "devices.count", f"must equal phones={self.params.phones} for a tune job"
            )
        if self.devices.count != self.params.phones:
            devices = self.devices.model_copy(update={"count": self.params.phones})
            object.__setattr__(self, "devices", devices)
        return self


def _tuning_records(
    work_dir: Path, workload: Callable[[int], str], target: dict[str, Any]
) -> list[TuningData]:
    """Every record of the work folder, labelled by ``workload(workload_index)``."""
    from farm.jobs.tuning_db import RECORDS_FILE
    from farm.queue.records import TuningData

    path = work_dir / RECORDS_FILE
    if not path.is_file():
        return []
    target_text = json.dumps(target, sort_keys=True)
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            index, record = json.loads(line)
            records.append(
                TuningData(workload(index), target_text,
                           {"workload_index": index, "record": record})
            )
    return records


def run(ctx: RunContext, spec: TuneJob) -> Outcome:
    """Tune the job's workload on the attempt's phones, resuming the job's earlier attempts.

    MetaSchedule measures each candidate on whichever phone of the job's key is
    free, into one database, so the phones must share one target
    (:func:`farm.jobs.targets.shared_target` refuses phones that disagree). Back
    on their own keys, each phone times the untuned and the tuned workload itself:
    every sample keeps the serial that produced it. The counters (rounds, app
    relaunches) live in the work folder, so they add up across resumes.
    Emulated devices check the path and the outputs and rank nothing
    (:mod:`farm.kinds.tune_emulated`).
    """
    from farm.kinds.tune_emulated import emulated_attempt, run_gemm_check, run_model_check

    if emulated_attempt(ctx):
        return (run_gemm_check(ctx, spec) if spec.params.model is None
                else run_model_check(ctx, spec.params, spec.params.model))
    if spec.params.model is not None:
        from farm.kinds.tune_model import run_model_tuning

        return run_model_tuning(ctx, spec.params, spec.params.model)
    return _run_gemm(ctx, spec)


@dataclass(frozen=True)
class GemmTuning:
    """A GEMM tuned on an attempt's devices, as :func:`tune_gemm_on` leaves it.

    Attributes:
        gemm: the workload's plain parameters.
        serials: the attempt's devices.
        target: their shared compile target.
        params: the tuning's parameters (builders not counted in).
        progress: the job's counters across its attempts.
        snapshots: each device's gate snapshot before the tuning.
        result: the tuning's result (tuned and untuned libraries).
    """

    gemm: GemmParams
    serials: list[str]
    target: dict[str, Any]
    params: TuneParams
    progress: TuneProgress
    snapshots: list[SnapshotData]
    result: TuneResult


def tune_gemm_on(ctx: RunContext, spec: TuneJob,
                 adjust: Callable[[TuneParams], TuneParams] = lambda params: params,
                 ) -> GemmTuning:
    """Tune the job's GEMM on its devices while they serve the job's key.

    Shared by a tune on real devices and the path check on emulated ones
    (:mod:`farm.kinds.tune_emulated`, which narrows the parameters through ``adjust``).

    Args:
        ctx: the attempt's context.
        spec: the tune job; ``params.gemm`` set.
        adjust: maps the tuning's parameters before the tuning starts.

    Raises:
        SpecError: the spec names no GEMM (run() sends a model elsewhere).
        CompileError, PhoneFault, SessionError, TrackerUnreachable: as ``tune_gemm``.
    """
    from dataclasses import replace

    from farm.jobs import params as jp
    from farm.jobs.targets import shared_target
    from farm.jobs.tuning_db import tune_work_dir
    from farm.kinds.run import phone_target, tracker_params
    from farm.kinds.serve_keys import serving_job_key
    from farm.tuning import TuneProgress, tune_gemm

    if spec.params.gemm is None:  # run() sends a model elsewhere: unreachable
        raise SpecError("params.gemm", "tuning needs a GEMM workload")
    gemm = gemm_params(spec.params.gemm)
    serials = list(ctx.attempt.serials)
    target = shared_target({serial: phone_target(serial, ctx, gemm.device) for serial in serials})
    work_dir = tune_work_dir(ctx.settings.data_dir, ctx.job.id)
    params = adjust(jp.TuneParams(
        gemm=gemm, trials=spec.params.trials or ctx.settings.jobs.tune_gemm_trials,
        work_dir=work_dir,
        trials_per_iter=spec.params.trials_per_batch, runner_workers=len(serials),
    ))
    progress = TuneProgress(work_dir)  # counters across this job's attempts
    snapshots = [ctx.gate(serial) for serial in serials]
    # The job's key, which only its phones serve while the job runs (farm.tvm.keys).
    with serving_job_key(ctx, serials, on_relaunch=progress.add_relaunch) as key, \
            held_tune_builders(ctx) as n:
        result = tune_gemm(replace(params, builder_workers=n), target,
                           tracker_params(ctx, serials[0], key), progress)
    return GemmTuning(gemm, serials, target, params, progress, snapshots, result)


def _run_gemm(ctx: RunContext, spec: TuneJob) -> Outcome:
    import statistics

    from farm.kinds.run import tracker_params
    from farm.queue.records import Outcome
    from farm.tuning import compare_tuned, gemm_label

    tuning = tune_gemm_on(ctx, spec)
    gemm, serials, target, params = tuning.gemm, tuning.serials, tuning.target, tuning.params
    progress, snapshots, result = tuning.progress, tuning.snapshots, tuning.result
    work_dir = params.work_dir
    comparisons = []
    for serial in serials:
        snapshots.append(ctx.gate(serial))
        comparisons.append(compare_tuned(params, target, tracker_params(ctx, serial), result))
    untuned = [s for c in comparisons for s in c.untuned_samples_s]
    tuned = [s for c in comparisons for s in c.tuned_samples_s]
    # Figures per phone, never averaged over phones; the top-level ones only with one phone.
    per_serial = {c.serial: {"speedup": c.speedup, "tuned_gflops": c.tuned_gflops,
                             "tuned_median_s": statistics.median(c.tuned_samples_s)}
                  for c in comparisons}
    only = next(iter(per_serial.values())) if len(per_serial) == 1 else {}
    summary = result.to_dict()
    summary.update(
        kind="tune", n=gemm.n, dtype=gemm.dtype, phones=serials,
        app_relaunches=list(progress.counters.app_relaunches),
        runs=[c.to_dict() for c in comparisons],
        untuned_samples_s=untuned, tuned_samples_s=tuned, per_serial=per_serial,
        speedup=only.get("speedup"), tuned_gflops=only.get("tuned_gflops"),
    )
    tuned_serials = [c.serial for c in comparisons for _ in c.tuned_samples_s]
    progress.finish("done")
    label = gemm_label(gemm)
    return Outcome(summary, tuned, "s", tuned_serials, snapshots,
                   _tuning_records(work_dir, lambda _index: label, target))


def workload(spec: Mapping[str, Any]) -> str:
    """``tune gemm n=512 float32`` or ``tune model small_cnn.onnx``."""
    params = spec.get("params") or {}
    model = params.get("model") if isinstance(params, Mapping) else None
    if isinstance(model, Mapping):
        return f"tune model {shown_name(model)}"
    return f"tune {gemm_workload({'params': params.get('gemm') or {}})}"


def needs(spec: Mapping[str, Any]) -> Requirements:
    """The workload's needs, on phones of one kind: measured candidates share one database."""
    params = spec.get("params")
    if not isinstance(params, Mapping):
        return workload_needs(None, alike=True)
    model = params.get("model")
    return workload_needs(model if isinstance(model, Mapping) else params.get("gemm"), alike=True)


def check(spec: TuneJob, store: Store, _data_dir: Path) -> None:
    """At enqueue: a model's input shapes fit it; named devices are all emulated or all real.

    The shapes: :mod:`farm.kinds.input_shapes`; the devices:
    :func:`farm.kinds.tune_emulated.refuse_mixed`.

    Raises:
        SpecError: on ``params.model.input_shapes``, one line naming the input;
            on ``devices.serials``, emulated and real devices named together.
    """
    from farm.kinds.input_shapes import check_spec_shapes
    from farm.kinds.tune_emulated import refuse_mixed

    refuse_mixed(spec.devices.serials, store)
    if spec.params.model is not None:
        check_spec_shapes(spec.params.model, store, "params.model.input_shapes")


_FLAGS = {"trials": "--trials", "trials_per_batch": "--trials-per-batch", "phones": "--phones",
          "trials_per_task": "--trials-per-task", "max_tasks": "--max-tasks", "for_s": "--for"}
_MODEL_FLAGS = {"path": "--model", "input_shapes": "--input-shape", "target": "--target"}


def _params(values: dict[str, Any]) -> dict[str, Any]:
    """The flags -> ``params``: a model when ``--model`` is given, else the gemm.

    Raises:
        SpecError: gemm flags given with ``--model`` (naming them), or a
            malformed ``--input-shape``.
    """
    common = {name: values[name] for name in _FLAGS}
    if values["path"] is None:
        return {"gemm": {name: values[name] for name in GEMM_FLAGS}, **common}
    if given := [flag for name, flag in GEMM_FLAGS.items()
                 if name != "target" and values[name] is not None]:
        # Two workloads: said in the words of the flags, not the spec's params.gemm.
        raise SpecError("params.model.path",
                        f"{' '.join(given)} set a gemm to tune: give them or --model, not both")
    model = {"path": values["path"],
             "input_shapes": parse_input_shape(values["input_shapes"],
                                               "params.model.input_shapes"),
             "target": values["target"]}
    return {"model": model, **common}

def _advise(params: dict[str, Any]) -> list[str]:
    """:func:`farm.tuning.advice.trials_advice` (TVM only when a model's --trials is given)."""
    from farm.tuning import trials_advice

    return trials_advice(params)


def held_tune_builders(ctx: RunContext) -> AbstractContextManager[int]:
    """The attempt's build processes, held in the host's ledger for the block.

    The ledger is ``<data_dir>/tune-cores``; ``jobs.tune_builder_workers`` (0:
    the host's free cores, shared: :mod:`farm.tuning.cores`).
    """
    from farm.tuning import held_builders

    return held_builders(Path(ctx.settings.data_dir) / "tune-cores",
                         ctx.settings.jobs.tune_builder_workers)


def timed_model(job_id: int, params: Mapping[str, Any]) -> TimedModel | None:
    """A model tune job's samples time its own tuned build; a gemm tune times no model."""
    model = params.get("model")
    return TimedModel(model, job_id, own_tuning=True) if isinstance(model, Mapping) else None


KIND = Kind(
    name="tune",
    spec=TuneJob,
    run=run,
    # Tuning saturates the host's cores compiling candidates, which can delay
    # heartbeats, so its lease is longer than a timed run's.
    lease_s=lambda jobs: jobs.tune_lease_s,
    timeout_s=lambda jobs: jobs.tune_timeout_s,
    enqueue=EnqueueCommand(
        help="Tune a gemm or an ONNX model across phones.",
        options=[
            *GEMM_OPTIONS,
            click.option("--model", "path",
                         help="Tune this ONNX file's tasks instead of a gemm "
                              "(--target cpu, opencl or cuda)."),
            click.option("--input-shape", "input_shapes", multiple=True,
                         help="NAME=D1,D2,... of the model (repeatable).  "
                              "[default: the model's own]"),
            click.option("--trials", type=int, help="Measured trials wanted in total.  "
                         "[default: the config's jobs.tune_model_trials (1000) for a model, "
                         "jobs.tune_gemm_trials (64) for a gemm]"),
            click.option("--for", "for_s", type=Seconds(1.0, MAX_FOR_S),
                         help="A model's tune job's time at most, e.g. 8h, its tuned build "
                              "and timing included (whichever of --trials and --for runs out "
                              "first).  "
                              "[default: the config's jobs.tune_model_for_s (8h)]"),
            click.option("--trials-per-task", type=int,
                         help="A model's measured trials per task at most.  "
                              "[default: trials shared by the tasks' FLOPs]"),
            click.option("--max-tasks", type=int,
                         help="Tune only the model's heaviest tasks, this many.  [default: all]"),
            click.option("--trials-per-batch", type=int,
                         help="Candidates built and measured per round. "
                              f"{default_of(TuneSpec, 'trials_per_batch')}"),
            click.option("--phones", type=int, help="Phones measuring candidates in parallel. "
                         f"{default_of(TuneSpec, 'phones')}"),
        ],
        params=_params,
        check=check,
        advise=_advise,
        flags={
            **{f"params.gemm.{name}": flag for name, flag in GEMM_FLAGS.items()},
            **{f"params.model.{name}": flag for name, flag in _MODEL_FLAGS.items()},
            **{f"params.{name}": flag for name, flag in _FLAGS.items()},
        },
    ),
    workload=workload,
    needs=needs,
    input_files=("params.model.path",),
    timed_model=timed_model,
    helper_attempts=lambda params: bool(params.get("model")),
)
