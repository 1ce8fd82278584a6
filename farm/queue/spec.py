"""The job spec: what a user asks the farm to run, validated before it is stored.

A spec is a plain mapping (from ``farmctl enqueue``, the config's recurring jobs
or a test) checked by :func:`parse_spec` into one of three pydantic models,
chosen by ``kind``::

    {"kind": "gemm", "params": {"n": 1024, "dtype": "float32", "bn": 32, "target": "cpu"},
     "devices": {"abi": "arm64-v8a", "count": 1}, "priority": 5, "attempts": 3}

A bad spec raises :class:`farm.errors.SpecError` whose ``field`` is the dotted
path of the first offending field (``"params.n"``, ``"devices.count"``), so the
user learns exactly what to fix. Unknown fields are refused too: a typo such as
``"prority"`` must not silently fall back to a default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from farm.errors import SpecError
from farm.jobs.params import MAX_GPU_WORK_GROUP_THREADS

__all__ = [
    "DeviceSelection",
    "GemmJob",
    "GemmParams",
    "JobKind",
    "JobSpec",
    "ModelJob",
    "ModelParams",
    "Tolerance",
    "TuneJob",
    "TuneParams",
    "parse_spec",
]


class JobKind(str, Enum):
    """What a job runs."""

    GEMM = "gemm"  # a square matrix multiply, timed
    MODEL = "model"  # an ONNX model, timed and checked against onnxruntime
    TUNE = "tune"  # MetaSchedule tuning of a gemm or an ONNX model


# No integer dtype: the gemm kernel accumulates in its element type, so an
# int8 sum overflows and could never match numpy.
Dtype = Literal["float32", "float16"]
Target = Literal["cpu", "opencl", "vulkan"]
Positive = Annotated[int, Field(ge=1)]

# Default time limits per kind, in seconds: a tuning run measures hundreds of
# candidates, a timed run only a handful.
DEFAULT_TIMEOUT_S = {JobKind.GEMM: 600.0, JobKind.MODEL: 1800.0, JobKind.TUNE: 6 * 3600.0}


class _Strict(BaseModel):
    """Frozen, refuses unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class GemmParams(_Strict):
    """``C[n, n] = A[n, n] @ B[n, n]``, tiled in ``bn x bn`` blocks.

    On a GPU target one work-group of ``bn * bn`` threads computes a block, so
    there ``bn * bn`` may not exceed :data:`MAX_GPU_WORK_GROUP_THREADS` (256). A
    missing ``bn`` becomes the largest power of two up to 32 (16 on a GPU) that
    divides ``n``.
    """

    n: int = Field(ge=16, le=8192)
    dtype: Dtype = "float32"
    bn: int | None = Field(default=None, ge=1)
    target: Target = "cpu"
    number: Positive = 10  # runs per timed repeat (TVM time_evaluator ``number``)
    repeat: Positive = 3  # timed repeats, one sample each
    min_repeat_ms: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _block_fits(self) -> GemmParams:
        gpu = self.target != "cpu"
        if self.bn is None:
            # The largest power-of-two block up to 32 that tiles n exactly and,
            # on a GPU, fits one work-group.
            bn = next(
                b
                for b in (32, 16, 8, 4, 2, 1)
                if self.n % b == 0 and not (gpu and b * b > MAX_GPU_WORK_GROUP_THREADS)
            )
            object.__setattr__(self, "bn", bn)
        elif self.bn > self.n or self.n % self.bn:
            raise _FieldError("bn", f"block size {self.bn} does not divide n={self.n}")
        elif gpu and self.bn * self.bn > MAX_GPU_WORK_GROUP_THREADS:
            raise _FieldError(
                "bn",
                f"bn*bn={self.bn**2} threads exceed a work-group of "
                f"{MAX_GPU_WORK_GROUP_THREADS} on phone GPUs; use bn <= 16 on {self.target}",
            )
        return self


class Tolerance(_Strict):
    """Allowed difference from onnxruntime's output, as in ``numpy.allclose``."""

    rtol: float = Field(default=1e-3, ge=0)
    atol: float = Field(default=1e-3, ge=0)


class ModelParams(_Strict):
    """An ONNX model on the host, compiled by TVM and timed on the phone."""

    path: str
    input_shapes: dict[str, list[Annotated[int, Field(ge=1)]]] | None = None
    tolerance: Tolerance = Tolerance()
    number: Positive = 10
    repeat: Positive = 3

    @field_validator("path")
    @classmethod
    def _readable_file(cls, value: str) -> str:
        path = Path(value).expanduser()
        if not path.is_file():
            raise ValueError(f"no such file: {value}")
        if not os.access(path, os.R_OK):
            raise ValueError(f"not readable: {value}")
        # Stored absolute: the job may run from another working directory.
        return str(path.resolve())


class TuneParams(_Strict):
    """MetaSchedule tuning of exactly one workload, ``gemm``.

    ``model`` is part of the schema but refused (``params.model``): the runner
    cannot tune ONNX models yet, and a job that can never run must not be queued.
    """

    gemm: GemmParams | None = None
    model: ModelParams | None = None
    trials: Positive = 64
    trials_per_batch: Positive = 16
    phones: Positive = 1  # phones measuring candidates in parallel

    @model_validator(mode="after")
    def _one_workload(self) -> TuneParams:
        if (self.gemm is None) == (self.model is None):
            raise _FieldError("gemm", "give exactly one workload: gemm or model")
        if self.model is not None:
            raise _FieldError("model", "tuning ONNX models is not supported yet; tune a gemm")
        if "trials_per_batch" not in self.model_fields_set:
            object.__setattr__(self, "trials_per_batch", min(self.trials_per_batch, self.trials))
        elif self.trials_per_batch > self.trials:
            raise _FieldError("trials_per_batch", "must not exceed trials")
        return self


class DeviceSelection(_Strict):
    """Which phones may run the job, and how many it needs at once.

    Every attribute given must match (they are ANDed); ``serials`` limits the
    candidates to those phones. Attributes are matched against the device facts
    the fleet records (see :func:`farm.queue.scheduler.matches`).
    """

    serials: list[str] | None = Field(default=None, min_length=1)
    abi: str | None = None  # e.g. "arm64-v8a", one of ro.product.cpu.abilist
    soc: str | None = None  # e.g. "SM8150", ro.soc.model, case-insensitive
    sdk_min: int | None = Field(default=None, ge=1)  # ro.build.version.sdk at least
    gpu: str | None = None  # substring of the GPU renderer, e.g. "adreno"
    count: Positive = 1

    @model_validator(mode="after")
    def _enough_serials(self) -> DeviceSelection:
        if self.serials is not None:
            if len(set(self.serials)) != len(self.serials):
                raise _FieldError("serials", "lists a serial twice")
            if self.count > len(self.serials):
                raise _FieldError(
                    "count", f"needs {self.count} phones, serials lists {len(self.serials)}"
                )
        return self


class _JobBase(_Strict):
    """Fields every kind shares."""

    devices: DeviceSelection = DeviceSelection()
    priority: int = Field(default=0, ge=-1000, le=1000)
    attempts: Positive = 3  # attempts at most, the first included
    timeout_s: float | None = Field(default=None, gt=0)  # None: the kind's default
    not_before: datetime | None = None  # naive means UTC
    repetitions: Positive = 1  # measured runs, each thermally gated

    @field_validator("not_before")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    @property
    def phones_needed(self) -> int:
        """How many phones the job holds at once."""
        return self.devices.count

    @property
    def effective_timeout_s(self) -> float:
        """The time limit of one attempt, in seconds."""
        kind = JobKind(self.kind)  # type: ignore[attr-defined]
        return self.timeout_s if self.timeout_s is not None else DEFAULT_TIMEOUT_S[kind]

    def to_json(self) -> dict[str, Any]:
        """The spec as JSON-ready data, defaults filled in, for storage."""
        return self.model_dump(mode="json")


class GemmJob(_JobBase):
    """Time a gemm on one or more phones."""

    kind: Literal["gemm"]
    params: GemmParams


class ModelJob(_JobBase):
    """Time an ONNX model and check its output."""

    kind: Literal["model"]
    params: ModelParams


class TuneJob(_JobBase):
    """Tune a workload; ``params.phones`` is how many phones the job holds."""

    kind: Literal["tune"]
    params: TuneParams

    @model_validator(mode="after")
    def _count_is_phones(self) -> TuneJob:
        if "count" in self.devices.model_fields_set and self.devices.count != self.params.phones:
            raise _FieldError("devices.count", "must equal params.phones for a tune job")
        if self.devices.count != self.params.phones:
            devices = self.devices.model_copy(update={"count": self.params.phones})
            object.__setattr__(self, "devices", devices)
        return self


JobSpec = GemmJob | ModelJob | TuneJob

_SPEC_BY_KIND: dict[str, type[_JobBase]] = {
    JobKind.GEMM.value: GemmJob,
    JobKind.MODEL.value: ModelJob,
    JobKind.TUNE.value: TuneJob,
}


class _FieldError(ValueError):
    """Raised inside a model validator to blame a field below the model."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(reason)


def parse_spec(raw: Mapping[str, Any]) -> JobSpec:
    """Validate a job spec.

    Args:
        raw: the spec as plain data (JSON types; ``not_before`` may be an ISO
            8601 string or a datetime).

    Returns:
        The validated spec, defaults filled in, frozen.

    Raises:
        SpecError: the first bad field, named by its dotted path.
    """
    if not isinstance(raw, Mapping):
        raise SpecError("spec", f"must be a mapping, not {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in _SPEC_BY_KIND:
        raise SpecError("kind", f"must be one of {', '.join(_SPEC_BY_KIND)}, not {kind!r}")
    try:
        return _SPEC_BY_KIND[kind].model_validate(dict(raw))  # type: ignore[return-value]
    except ValidationError as exc:
        raise _spec_error(exc) from exc


def _spec_error(exc: ValidationError) -> SpecError:
    """Map pydantic's first error to a SpecError naming the field."""
    error = exc.errors()[0]
    location = [str(part) for part in error["loc"]]
    reason = error["msg"]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _FieldError):
        location.append(cause.field)
        reason = cause.reason
    elif reason.startswith("Value error, "):
        reason = reason.removeprefix("Value error, ")
    return SpecError(".".join(location) or "spec", reason)
