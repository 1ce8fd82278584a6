"""The ``model`` kind: time an ONNX model on phones and check it against onnxruntime.

The model file is stored in the database at enqueue (``Kind.input_files``,
:mod:`farm.jobs.model_store`): the spec names it by ``params.sha256`` and keeps
the user's file name in ``params.name``; the attempt, on whichever host, reads it
from that host's cache (:func:`model_file`). With
``--tuned JOB_ID`` the model is compiled with that finished tuning job's
MetaSchedule database applied (:mod:`farm.kinds.tuned` checks the job at enqueue).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import click
from pydantic import Field, ValidationInfo, field_validator, model_validator

from farm.errors import SpecError
from farm.kinds.base import EnqueueCommand, Kind, TimedModel, default_of
from farm.kinds.gemm import MAX_NUMBER, MAX_REPEAT, TIMING_FLAGS, TIMING_OPTIONS
from farm.kinds.model_inputs import InputsBlob, check_inputs
from farm.queue.capabilities import workload_needs
from farm.queue.limits import DB_INT_MAX
from farm.queue.spec import MAX_PHONES, DeviceSelection, JobBase, Strict, Text

if TYPE_CHECKING:
    from farm.jobs import params as jp
    from farm.kinds.run import RunContext
    from farm.kinds.tuned import FinishedTune
    from farm.queue.blobs import BlobOps
    from farm.queue.records import Outcome
    from farm.queue.store import Store

__all__ = ["KIND", "ModelBenchSpec", "ModelJob", "ModelSpec", "Tolerance", "model_file",
           "model_params", "parse_input_shape", "shown_name"]

#: An input tensor's rank and each dimension at most (TVM shapes are int64; an
#: input beyond 2**31 elements per axis does not fit a phone anyway).
MAX_RANK = 8
MAX_DIM = 2**31 - 1


class Tolerance(Strict):
    """Allowed difference from onnxruntime's output, as in ``numpy.allclose``."""

    rtol: float = Field(default=1e-3, ge=0, le=1e6)
    atol: float = Field(default=1e-3, ge=0, le=1e6)


class ModelSpec(Strict):
    """An ONNX model, compiled by TVM and timed on the phone.

    Once enqueued the model is a blob in the database: ``sha256`` names it and
    ``name`` is the user's file name. A spec may name a ``path`` instead (a file
    on the host that runs the job, checked when the spec is validated; specs
    stored before blobs have both, and their ``path`` is not read).
    """

    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    path: Text | None
    name: Text | None = None
    input_shapes: (
        dict[Text, Annotated[list[Annotated[int, Field(ge=1, le=MAX_DIM)]],
                             Field(max_length=MAX_RANK)]] | None
    ) = Field(default=None, max_length=256)
    tolerance: Tolerance = Tolerance()
    number: int = Field(default=10, ge=1, le=MAX_NUMBER)
    repeat: int = Field(default=3, ge=1, le=MAX_REPEAT)

    @model_validator(mode="before")
    @classmethod
    def _blob_needs_no_path(cls, data: Any) -> Any:
        """A stored model (``sha256``) needs no ``path``; without either, path is required."""
        if isinstance(data, dict) and data.get("sha256") is not None and "path" not in data:
            return {**data, "path": None}
        return data

    @field_validator("path")
    @classmethod
    def _readable_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or info.data.get("sha256") is not None:
            return value  # a stored model: the path (if any) was another host's
        try:
            path = Path(value).expanduser()
            if not path.is_file():
                raise ValueError(f"no such file: {value!r}")
            if not os.access(path, os.R_OK):
                raise ValueError(f"not readable: {value!r}")
            # Stored absolute: the job may run from another working directory.
            return str(path.resolve())
        except RuntimeError:  # expanduser of ~nosuchuser
            raise ValueError(f"no such user's home: {value!r}") from None
        except OSError as exc:  # a name too long, a loop of links...
            raise ValueError(f"cannot read {value!r}: {exc.strerror}") from None

    @model_validator(mode="after")
    def _names_a_model(self) -> ModelSpec:
        if self.path is None and self.sha256 is None:
            raise ValueError("give the model's path or its stored sha256")
        return self

    @property
    def shown_name(self) -> str:
        """The model as people read it: the user's file name, else the path's, else the digest."""
        if self.name:
            return self.name
        return Path(self.path).name if self.path else f"{self.sha256}.onnx"


class ModelBenchSpec(ModelSpec):
    """A model benchmark: the model, the processor, and optionally a tuning job's records."""

    target: Literal["cpu", "opencl", "cuda"] = "cpu"
    # A finished tune job of this model; bounded as every id is (farm.queue.limits).
    tuned: int | None = Field(default=None, ge=1, le=DB_INT_MAX)
    profile: bool = False  # also time each kernel on the phone (farm.jobs.profile)
    inputs: InputsBlob | None = None  # the user's .npz (farm.kinds.model_inputs)


class ModelJob(JobBase):
    """Time an ONNX model and check its output."""

    kind: Literal["model"]
    params: ModelBenchSpec


def model_file(p: ModelSpec, store: BlobOps | None, data_dir: Path,
               field: str = "params.sha256") -> Path:
    """The model's file on this host: the blob's cached copy, or the spec's own path.

    Args:
        p: the spec's model.
        store: the queue holding the blob (None: the cache only).
        data_dir: this host's data folder (the cache is under it).
        field: the spec field naming the blob, for errors.

    Raises:
        SpecError: the blob is not in the database (nor cached here).
        StoreError: the blob is damaged or cannot be read.
    """
    from farm.jobs.model_store import materialise

    if p.sha256 is not None:
        return materialise(store, p.sha256, data_dir, field)
    return Path(str(p.path))


def model_params(p: ModelSpec, model_path: Path, device: str = "cpu",
                 database_dir: Path | None = None, profile: bool = False) -> jp.ModelParams:
    """The jobs' plain parameters of a validated model spec.

    Args:
        p: the spec's model.
        model_path: its file on this host (:func:`model_file`).
        device: ``"cpu"``, ``"opencl"`` or ``"cuda"``.
        database_dir: a tuning work folder whose records are applied.
        profile: also time each kernel (:mod:`farm.jobs.profile`).
    """
    from farm.jobs import params as jp

    shapes = None if p.input_shapes is None else {k: tuple(v) for k, v in p.input_shapes.items()}
    return jp.ModelParams(
        model_path=model_path, input_shapes=shapes, device=jp.DeviceKind(device),
        rtol=p.tolerance.rtol, atol=p.tolerance.atol,
        timing=jp.TimingParams(number=p.number, repeat=p.repeat), database_dir=database_dir,
        name=p.shown_name, profile=profile,
    )


def check_tuned(spec: ModelJob, store: Store, data_dir: Path) -> FinishedTune | None:
    """``--tuned``: a succeeded tune of the same model (SHA-256) for the same target.

    Returns:
        The tune job; None without ``--tuned``.

    Raises:
        SpecError: ``params.tuned`` names no such job, a job that is not a
            finished model tune, another model's or another target's tuning;
            ``params.input_shapes`` differ from the tuning's.
    """
    from farm.kinds.tuned import finished_tune

    p = spec.params
    if p.tuned is None:
        return None
    tune = finished_tune(store, data_dir, p.tuned)
    if tune.model_sha256 != p.sha256:
        raise SpecError("params.tuned", f"tune job {p.tuned} tuned another model "
                        f"(sha256 {tune.model_sha256[:12]}, this one {str(p.sha256)[:12]})")
    if tune.device != p.target:
        raise SpecError("params.tuned", f"tune job {p.tuned} tuned for {tune.device}, "
                        f"not --target {p.target}")
    tuned_shapes = tune.job.spec["params"]["model"].get("input_shapes")
    if tuned_shapes != p.input_shapes:  # other shapes make other tasks: none would match
        raise SpecError("params.input_shapes", f"tune job {p.tuned} tuned input shapes "
                        f"{tuned_shapes or 'of the model'}; give the same")
    return tune


def prefer_tune_phones(spec: ModelJob, tune: FinishedTune) -> ModelJob:
    """``spec`` preferring the phones ``tune`` ran on (``devices.prefer_serials``).

    ``compare`` judges phone by phone: a ``--tuned N`` job that ran on other
    phones than tune job N shares none of them with it, and two phones'
    speeds differ by more than a tuning gains. A spec that names its phones
    (``--serial``) or its preference is kept as given.
    """
    devices = spec.devices
    if devices.serials is not None or devices.prefer_serials is not None or not tune.serials:
        return spec
    preferred = DeviceSelection.model_validate(
        {**devices.model_dump(), "prefer_serials": tune.serials[:MAX_PHONES]})
    return spec.model_copy(update={"devices": preferred})


def check_model(spec: ModelJob, store: Store, data_dir: Path) -> ModelJob:
    """At enqueue: the input shapes fit the model, and ``--tuned`` names a fitting tune.

    A symbolic input that ``--input-shape`` leaves unset takes the shape of
    its array in ``--inputs`` (:func:`farm.kinds.model_inputs.shapes_of_inputs`).

    Returns:
        The spec, with those shapes in ``params.input_shapes``; with ``--tuned N``,
        preferring tune job N's phones (:func:`prefer_tune_phones`).

    Raises:
        SpecError: see :func:`farm.kinds.input_shapes.check_input_shapes`,
            :func:`~farm.kinds.input_shapes.check_input_sizes` (those shapes
            included), :func:`farm.kinds.model_inputs.shapes_of_inputs` and
            :func:`check_tuned`.
    """
    from farm.kinds.input_shapes import check_farm_sizes, check_input_shapes, model_inputs_of
    from farm.kinds.model_inputs import FIELD, shapes_of_inputs

    p = spec.params
    declared = model_inputs_of(p, store, "params.sha256")
    given = p.input_shapes or {}
    filled = {} if p.inputs is None else shapes_of_inputs(declared, p.inputs, store, given)
    check_input_shapes(declared, given, p.shown_name, "params.input_shapes", filled, FIELD)
    check_farm_sizes(declared, {**filled, **given}, p.shown_name, "params.input_shapes", store)
    if filled:
        p = p.model_copy(update={"input_shapes": {**filled, **given}})
        spec = spec.model_copy(update={"params": p})
    tune = check_tuned(spec, store, data_dir)
    check_inputs(p, p.inputs, store)
    return spec if tune is None else prefer_tune_phones(spec, tune)


def run(ctx: RunContext, spec: ModelJob) -> Outcome:
    """Time the model ``repetitions`` times on each phone, every sample kept with its serial."""
    from farm.jobs.model import run_model
    from farm.jobs.model_io import output_names
    from farm.jobs.tuning_db import tune_work_dir
    from farm.kinds.measure import measure, summary_of_runs
    from farm.kinds.model_inputs import read_feeds
    from farm.sampling import SamplingRule

    p = spec.params
    database_dir = None if p.tuned is None else tune_work_dir(ctx.settings.data_dir, p.tuned)
    path = model_file(p, ctx.store, Path(ctx.settings.data_dir))
    params = model_params(p, path, p.target, database_dir, p.profile)
    names: list[str] | None = None
    if p.inputs is not None:
        params = replace(params, inputs=read_feeds(p, p.inputs, path, ctx.store))
        names = output_names(path)
    measured = measure(
        ctx, spec.repetitions, params.device,
        lambda tracker, target, _rep: run_model(
            params, target, tracker, ctx.cache, sampling=SamplingRule.of(ctx.settings.results),
            peak_memory=lambda: ctx.app_memory(tracker.serial) if tracker.serial else None),
        lambda result: {"model_sha256": result.model_sha256, "imported": result.imported,
                        "load_s": result.load_s, "first_run_s": result.first_run_s,
                        "peak_memory_kb": result.peak_memory_kb,
                        "profile": result.profile.to_dict() if result.profile else None,
                        "outputs_sha256": _stored_outputs(ctx, result.outputs, names)},
    )
    summary = summary_of_runs("model", measured)
    imported = next((r["imported"] for r in measured.runs if r.get("imported")), None)
    summary.update(model=p.shown_name, target=p.target, tuned=p.tuned, imported=imported)
    return measured.outcome(summary)


def _stored_outputs(ctx: RunContext, outputs: list[Any] | None,
                    names: list[str] | None) -> str | None:
    """The phone's outputs on the user's inputs as a blob; None without them.

    An ``.npz`` keyed by the graph's output ``names`` (:func:`farm.jobs.model_io.outputs_npz`).
    """
    from farm.clock import SystemClock
    from farm.jobs.model_io import outputs_npz

    if outputs is None or ctx.store is None:
        return None
    return ctx.store.put_blob(outputs_npz(outputs, names), SystemClock().now())


def workload(spec: Mapping[str, Any]) -> str:
    """``model small_cnn.onnx``, ``model small_cnn.onnx tuned 7`` with a tuning's records."""
    params = spec.get("params")
    params = params if isinstance(params, Mapping) else {}
    label = f"model {shown_name(params)}"
    return label if params.get("tuned") is None else f"{label} tuned {params['tuned']}"


def shown_name(model: Mapping[str, Any]) -> str:
    """A stored spec's model as people read it (``name``, else the path's or the digest's)."""
    if model.get("name"):
        return str(model["name"])
    if model.get("path"):
        return Path(str(model["path"])).name
    return f"{model.get('sha256') or '?'}.onnx"


def parse_input_shape(values: tuple[str, ...], field: str = "params.input_shapes"
                      ) -> dict[str, list[int]] | None:
    """``("data=1,3,224,224",)`` -> ``{"data": [1, 3, 224, 224]}``.

    Args:
        values: the ``--input-shape`` flags, in order.
        field: the spec field they set, for errors (``params.model.input_shapes``
            for a tune job).

    Raises:
        SpecError: a value is not ``NAME=D1,D2,...`` with integer dimensions,
            or names an input a second time.
    """
    if not values:
        return None
    shapes: dict[str, list[int]] = {}
    for value in values:
        name, sep, dims = value.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            dims_list = [int(d) for d in dims.split(",")]
        except ValueError:
            raise SpecError(field, f"{value!r} is not NAME=D1,D2,...") from None
        if name in shapes:
            raise SpecError(field, f"input {name!r} given twice")
        shapes[name] = dims_list
    return shapes


def _params(values: dict[str, Any]) -> dict[str, Any]:
    tolerance = {k: values[k] for k in ("rtol", "atol") if values[k] is not None}
    return {"path": values["path"], "input_shapes": parse_input_shape(values["input_shapes"]),
            "tolerance": tolerance or None, "number": values["number"], "repeat": values["repeat"],
            "target": values["target"], "tuned": values["tuned"],
            "profile": values["profile"] or None, "inputs": values["inputs"]}


def timed_model(job_id: int, params: Mapping[str, Any]) -> TimedModel:  # noqa: ARG001
    """The model a model job times: its own, untuned or built with ``--tuned N``'s records."""
    tuned = params.get("tuned")
    return TimedModel(params, tuned if type(tuned) is int else None)


KIND = Kind(
    name="model",
    spec=ModelJob,
    run=run,
    lease_s=lambda jobs: jobs.lease_s,
    timeout_s=lambda jobs: jobs.model_timeout_s,
    enqueue=EnqueueCommand(
        help="Time an ONNX model and check its output against onnxruntime.",
        options=[
            click.option("--model", "path", help="The ONNX file on this host; required."),
            click.option("--input-shape", "input_shapes", multiple=True,
                         help="NAME=D1,D2,... (repeatable).  [default: the model's own]"),
            click.option("--rtol", type=float, help="Relative tolerance against onnxruntime. "
                         f"{default_of(Tolerance, 'rtol')}"),
            click.option("--atol", type=float, help="Absolute tolerance against onnxruntime. "
                         f"{default_of(Tolerance, 'atol')}"),
            click.option("--target", type=click.Choice(["cpu", "opencl", "cuda"]),
                         help=f"Processor that runs it. {default_of(ModelBenchSpec, 'target')}"),
            click.option("--tuned", type=int,
                         help="A finished `tune --model` job of this model whose tuning "
                              "records are applied.  [default: untuned]"),
            click.option("--inputs", help="A numpy .npz of the model's inputs, by input name, "
                                           "instead of random ones; a symbolic dimension "
                                           "takes its array's size; the outputs are kept "
                                           "(`farmctl results --job N --outputs DIR`)."),
            click.option("--profile", is_flag=True,
                         help="Also time each kernel of the model on the phone; "
                              "`farmctl results --job N` lists the heaviest."),
            *TIMING_OPTIONS,
        ],
        params=_params,
        check=check_model,
        flags={"params.path": "--model", "params.input_shapes": "--input-shape",
               "params.target": "--target", "params.tuned": "--tuned",
               "params.profile": "--profile", "params.inputs": "--inputs",
               "params.tolerance.rtol": "--rtol", "params.tolerance.atol": "--atol",
               **{f"params.{name}": flag for name, flag in TIMING_FLAGS.items()}},
    ),
    workload=workload,
    needs=lambda spec: workload_needs(spec.get("params")),
    fan_out=True,
    input_files=("params.path",),
    timed_model=timed_model,
)
