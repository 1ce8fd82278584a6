"""The ``model`` kind: time an ONNX model on phones and check it against onnxruntime."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import click
from pydantic import Field, field_validator

from farm.errors import SpecError
from farm.kinds.base import EnqueueCommand, Kind, default_of
from farm.kinds.gemm import MAX_NUMBER, MAX_REPEAT, TIMING_FLAGS, TIMING_OPTIONS
from farm.queue.capabilities import ANY_PHONE
from farm.queue.spec import JobBase, Strict, Text

if TYPE_CHECKING:
    from farm.jobs import params as jp
    from farm.queue.records import Outcome
    from farm.runner.execute import RunContext

__all__ = ["KIND", "ModelJob", "ModelParams", "Tolerance", "parse_input_shape"]

#: An input tensor's rank and each dimension at most (TVM shapes are int64; an
#: input beyond 2**31 elements per axis does not fit a phone anyway).
MAX_RANK = 8
MAX_DIM = 2**31 - 1


class Tolerance(Strict):
    """Allowed difference from onnxruntime's output, as in ``numpy.allclose``."""

    rtol: float = Field(default=1e-3, ge=0, le=1e6)
    atol: float = Field(default=1e-3, ge=0, le=1e6)


class ModelParams(Strict):
    """An ONNX model on the host, compiled by TVM and timed on the phone."""

    path: Text
    input_shapes: (
        dict[Text, Annotated[list[Annotated[int, Field(ge=1, le=MAX_DIM)]],
                             Field(max_length=MAX_RANK)]] | None
    ) = Field(default=None, max_length=256)
    tolerance: Tolerance = Tolerance()
    number: int = Field(default=10, ge=1, le=MAX_NUMBER)
    repeat: int = Field(default=3, ge=1, le=MAX_REPEAT)

    @field_validator("path")
    @classmethod
    def _readable_file(cls, value: str) -> str:
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


class ModelJob(JobBase):
    """Time an ONNX model and check its output."""

    kind: Literal["model"]
    params: ModelParams


def model_params(p: ModelParams) -> jp.ModelParams:
    """The jobs' plain parameters of a validated model spec (CPU only, for now)."""
    from farm.jobs import params as jp

    shapes = None if p.input_shapes is None else {k: tuple(v) for k, v in p.input_shapes.items()}
    return jp.ModelParams(
        model_path=Path(p.path), input_shapes=shapes, device=jp.DeviceKind("cpu"),
        rtol=p.tolerance.rtol, atol=p.tolerance.atol,
        timing=jp.TimingParams(number=p.number, repeat=p.repeat),
    )


def run(ctx: RunContext, spec: ModelJob) -> Outcome:
    """Time the model ``repetitions`` times on each phone, every sample kept with its serial."""
    from farm.jobs.model import run_model
    from farm.runner.measure import measure, summary_of_runs

    params = model_params(spec.params)
    measured = measure(
        ctx, spec.repetitions, params.device,
        lambda tracker, target, _rep: run_model(params, target, tracker, ctx.cache),
        lambda result: {"model_sha256": result.model_sha256},
    )
    summary = summary_of_runs("model", measured)
    summary["model"] = Path(params.model_path).name
    return measured.outcome(summary)


def workload(spec: Mapping[str, Any]) -> str:
    """``model small_cnn.onnx``."""
    params = spec.get("params") or {}
    return f"model {Path(str(params.get('path', '?'))).name}"


def parse_input_shape(values: tuple[str, ...]) -> dict[str, list[int]] | None:
    """``("data=1,3,224,224",)`` -> ``{"data": [1, 3, 224, 224]}``.

    Raises:
        SpecError: a value is not ``NAME=D1,D2,...`` with integer dimensions.
    """
    if not values:
        return None
    shapes: dict[str, list[int]] = {}
    for value in values:
        name, sep, dims = value.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise SpecError("params.input_shapes", f"{value!r} is not NAME=D1,D2,...") from None
    return shapes


def _params(values: dict[str, Any]) -> dict[str, Any]:
    tolerance = {k: values[k] for k in ("rtol", "atol") if values[k] is not None}
    return {"path": values["path"], "input_shapes": parse_input_shape(values["input_shapes"]),
            "tolerance": tolerance or None, "number": values["number"], "repeat": values["repeat"]}


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
            *TIMING_OPTIONS,
        ],
        params=_params,
        flags={"params.path": "--model", "params.input_shapes": "--input-shape",
               "params.tolerance.rtol": "--rtol", "params.tolerance.atol": "--atol",
               **{f"params.{name}": flag for name, flag in TIMING_FLAGS.items()}},
    ),
    workload=workload,
    needs=lambda _spec: ANY_PHONE,  # models compile for the CPU only, for now (model_params)
    fan_out=True,
)
