"""The two sides of an A/B job: what a user names, and the build it stands for.

A side (:class:`AbBuild`) is one of:

- ``gemm:n=256`` (``gemm:n=256,bn=16,dtype=float16``): a GEMM of the ``gemm``
  kind's parameters;
- a path to an ONNX file: that model, untuned (``--tuned N`` on the command
  line applies tune job N's records to side B);
- a job id, ``12``: the build finished job 12 timed: a gemm job's GEMM, a
  model job's model (with its ``--tuned`` records), a model tune job's tuned
  build; ``12:untuned`` is a model tune job's untuned build.

A job side is kept as the id in the spec and resolved to its build
(:func:`resolve`) at enqueue (to refuse it early) and again by the attempt,
so the spec needs no copy of the job's parameters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from farm.errors import SpecError
from farm.kinds.base import TimedModel
from farm.kinds.gemm import GemmSpec
from farm.kinds.gemm import workload as gemm_workload
from farm.kinds.model import ModelBenchSpec, ModelSpec
from farm.queue.models import DB_INT_MAX, JobState
from farm.queue.spec import FieldError, Strict

if TYPE_CHECKING:
    from farm.queue.store import Store

__all__ = ["AbBuild", "Resolved", "parse_build", "resolve", "side_label"]

_JOB_REF = re.compile(r"^(\d+)(?::(untuned|tuned))?$")


class AbBuild(Strict):
    """One side of an A/B job: exactly one of ``gemm``, ``model`` or ``job``.

    Attributes:
        gemm: a GEMM.
        model: an ONNX model (stored as a blob at enqueue).
        tuned: with ``model``: a finished tune job of that model whose records apply.
        job: a finished job whose build this side times (see the module doc).
        untuned: with ``job``: a model tune job's untuned build.
    """

    gemm: GemmSpec | None = None
    model: ModelSpec | None = None
    tuned: int | None = Field(default=None, ge=1, le=DB_INT_MAX)
    job: int | None = Field(default=None, ge=1, le=DB_INT_MAX)
    untuned: bool = False

    @model_validator(mode="after")
    def _one_build(self) -> AbBuild:
        given = [name for name in ("gemm", "model", "job") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give one build: a gemm (gemm:n=256), an ONNX file or a job id")
        if self.tuned is not None and self.model is None:
            raise FieldError("tuned", "--tuned applies to a model file's side")
        if self.untuned and self.job is None:
            raise FieldError("untuned", ":untuned follows a tune job's id")
        return self


def parse_build(ref: str, field: str = "params.a") -> dict[str, Any]:
    """What the user typed for a side -> the side's spec (JSON data).

    >>> parse_build("12:untuned"), parse_build("gemm:n=256,bn=16")
    ({'job': 12, 'untuned': True}, {'gemm': {'n': '256', 'bn': '16'}})
    >>> parse_build("mobilenet.onnx")
    {'model': {'path': 'mobilenet.onnx'}}

    Args:
        ref: the side as typed.
        field: the side's spec field (``params.a``, ``params.b``), for errors.

    Raises:
        SpecError: a ``gemm:`` side that is not ``gemm:NAME=VALUE,...``.
    """
    ref = ref.strip()
    if match := _JOB_REF.match(ref):
        return {"job": int(match[1]), "untuned": match[2] == "untuned"}
    if ref.startswith("gemm:"):
        fields: dict[str, Any] = {}
        for item in filter(None, ref.removeprefix("gemm:").split(",")):
            name, sep, value = item.partition("=")
            if not sep or not name.strip() or name.strip() in fields:
                raise SpecError(field, f"{ref!r} is not a GEMM: write gemm:n=256 or "
                                       "gemm:n=256,bn=16,dtype=float16, each parameter once")
            fields[name.strip()] = value.strip()
        return {"gemm": fields}
    return {"model": {"path": ref}}


@dataclass(frozen=True)
class Resolved:
    """A side's build.

    Attributes:
        label: the build as people read it: ``gemm n=256 float32``,
            ``model m.onnx tuned 6``; a job side adds ``(job 12)``.
        gemm: the GEMM, or None.
        model: the model (its ``tuned`` field names the records), or None.
    """

    label: str
    gemm: GemmSpec | None = None
    model: ModelBenchSpec | None = None


def _model_label(model: ModelSpec, tuned: int | None) -> str:
    label = f"model {model.shown_name}"
    return label if tuned is None else f"{label} tuned {tuned}"


def _timed_model(kind: str, job_id: int, params: Mapping[str, Any]) -> TimedModel | None:
    """The model a job of ``kind`` times, as the kind says (its ``timed_model`` hook)."""
    from farm.kinds import KINDS  # the table lists this package's kinds: imported once built

    declared = KINDS.get(kind)
    hook = None if declared is None else declared.timed_model
    return None if hook is None else hook(job_id, params)


def _of_job(store: Store, job_id: int, untuned: bool, field: str) -> Resolved:
    job = store.get_job(job_id)
    if job is None:
        raise SpecError(field, f"no job {job_id}")
    if job.state is not JobState.SUCCEEDED:
        raise SpecError(field, f"job {job_id} has not finished well: it is {job.state.value}")
    params = job.spec.get("params")
    params = params if isinstance(params, Mapping) else {}
    try:
        if job.kind == "gemm" and not untuned:
            gemm = GemmSpec.model_validate(params)
            return Resolved(f"{gemm_workload(job.spec)} (job {job_id})", gemm=gemm)
        timed = _timed_model(job.kind, job_id, params)
        if timed is not None and timed.own_tuning:
            model = ModelBenchSpec.model_validate(
                {**timed.model, "tuned": None if untuned else job_id})
            return Resolved(f"{_model_label(model, model.tuned)} (job {job_id})", model=model)
        if timed is not None and not untuned:
            model = ModelBenchSpec.model_validate({**timed.model, "profile": False})
            return Resolved(f"{_model_label(model, model.tuned)} (job {job_id})", model=model)
    except ValueError as exc:  # a spec of another farm version
        raise SpecError(field, f"job {job_id}'s spec cannot be read here: {exc}") from None
    what = f"job {job_id}:untuned" if untuned else f"job {job_id}"
    raise SpecError(field, f"{what} is a {job.kind} job: a side is a gemm or model job, "
                           "a model tune job, or N:untuned of a model tune job")


def resolve(build: AbBuild, target: str, store: Store | None, field: str) -> Resolved:
    """The build a side stands for; a job side is read from ``store``.

    Args:
        build: the side.
        target: the A/B job's processor for model sides (``cpu``, ``opencl``, ``cuda``).
        store: the queue (job sides need it).
        field: the side's spec field (``params.a``), for errors.

    Raises:
        SpecError: a job side names no job, an unfinished one, or a kind
            that has no build (see the module doc).
    """
    if build.gemm is not None:
        return Resolved(gemm_workload({"params": build.gemm.model_dump()}), gemm=build.gemm)
    if build.model is not None:
        model = ModelBenchSpec.model_validate(
            {**build.model.model_dump(), "tuned": build.tuned, "target": target})
        return Resolved(_model_label(model, build.tuned), model=model)
    if store is None:
        raise SpecError(field, "a job's build is read from the queue, which is not open")
    resolved = _of_job(store, int(build.job or 0), build.untuned, field)
    if resolved.model is not None:
        resolved = Resolved(resolved.label,
                            model=resolved.model.model_copy(update={"target": target}))
    return resolved


def side_label(side: Mapping[str, Any]) -> str:
    """A stored side as people read it, from the spec alone: ``job 12:untuned``, ``m.onnx``."""
    if isinstance(side.get("job"), int):
        return f"job {side['job']}" + (":untuned" if side.get("untuned") else "")
    if isinstance(side.get("gemm"), Mapping):
        return gemm_workload({"params": side["gemm"]})
    model = side.get("model")
    if isinstance(model, Mapping):
        from farm.kinds.model import shown_name

        label = f"model {shown_name(model)}"
        return label if side.get("tuned") is None else f"{label} tuned {side['tuned']}"
    return "?"
