"""Builds of one model: untuned and tuned by job N, comparable with each other.

``farmctl compare`` compares two sides of one workload. A model's builds have
different workload labels (``model m.onnx``, ``model m.onnx tuned 7``, the
tune job's ``tune model m.onnx``), yet they run the same model on the same
inputs: comparing them is the point of tuning. Here a model's workload
identity is its file's SHA-256, its input shapes and its target (``--input-shape``
as given; ``--tuned`` requires the tuning's own), and the build says which is which:

==========================================  ===================
side                                        build
==========================================  ===================
``model`` job                               ``untuned``
``model --tuned 7`` job                     ``tuned by job 7``
``tune --model`` job 7 (its raw samples)    ``tuned by job 7``
``7:untuned`` (that job's untuned timings)  ``untuned``
==========================================  ===================

A tune job times each phone untuned and tuned after tuning
(:func:`farm.kinds.tune_model.run_model_tuning`); its raw samples are the tuned
ones, the untuned ones are in its summary's ``runs`` (``untuned_samples_s``),
which :func:`untuned_timings` reads for a ``JOB:untuned`` side.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from farm.errors import UserFault
from farm.queue.records import JobView
from farm.queue.store import Store

__all__ = ["UNTUNED", "Build", "build_of", "split_ref", "untuned_timings"]

#: The suffix of a ref naming a tune job's untuned timings: ``7:untuned``.
UNTUNED = "untuned"

#: Suffixes a ref may carry (``7:tuned`` is ``7``).
_SUFFIXES = (UNTUNED, "tuned")


@dataclass(frozen=True)
class Build:
    """Which model, inputs and target a job measured, and which build of it.

    Attributes:
        identity: ``sha256=<digest> inputs=<shapes> target=<cpu>``, equal for every
            build of one model on the same inputs and processor.
        label: ``"untuned"`` or ``"tuned by job N"``.
    """

    identity: str
    label: str


def split_ref(ref: str) -> tuple[str, bool]:
    """``"7:untuned"`` -> ``("7", True)``; ``"7"`` and ``"7:tuned"`` -> ``("7", False)``.

    Raises:
        UserFault: an unknown suffix.
    """
    base, sep, suffix = ref.partition(":")
    if not sep:
        return ref, False
    if suffix not in _SUFFIXES:
        raise UserFault(f"{ref!r}: after ':' give untuned or tuned (a tune job's builds)")
    return base, suffix == UNTUNED


def _model_of(job: JobView) -> Mapping[str, Any] | None:
    params = job.spec.get("params")
    if not isinstance(params, Mapping):
        return None
    if job.kind == "model":
        return params
    model = params.get("model") if job.kind == "tune" else None
    return model if isinstance(model, Mapping) else None


def build_of(job: JobView, untuned: bool = False) -> Build | None:
    """The build ``job`` measured; None for a job that times no model (gemm, a gemm tune).

    Args:
        job: a ``model`` job or a ``tune --model`` job.
        untuned: the tune job's untuned timings rather than its tuned ones.
    """
    model = _model_of(job)
    if model is None or not model.get("sha256"):
        return None
    shapes = json.dumps(model.get("input_shapes"), sort_keys=True)
    identity = f"sha256={model['sha256']} inputs={shapes} target={model.get('target', 'cpu')}"
    if job.kind == "tune":
        return Build(identity, UNTUNED if untuned else f"tuned by job {job.id}")
    tuned = model.get("tuned")
    return Build(identity, UNTUNED if tuned is None else f"tuned by job {tuned}")


def untuned_timings(store: Store, job: JobView) -> dict[str, tuple[float, ...]]:
    """serial -> the untuned seconds per run a tune job measured after tuning.

    Raises:
        UserFault: ``job`` is not a model tune job, or its result has no untuned timings.
    """
    if _model_of(job) is None or job.kind != "tune":
        raise UserFault(f"job {job.id} is a {job.kind} job: only a tune --model job has "
                        "its own untuned timings (JOB:untuned)")
    timings: dict[str, tuple[float, ...]] = {}
    for result in store.results(job.id):
        for run in result.summary.get("runs") or ():
            samples = run.get("untuned_samples_s") if isinstance(run, Mapping) else None
            if samples:
                timings[str(run["serial"])] = tuple(float(s) for s in samples)
    if not timings:
        raise UserFault(f"job {job.id} has no untuned timings")
    return timings
