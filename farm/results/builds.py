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

Which model a job times and which build is its kind's answer
(:attr:`farm.kinds.base.Kind.timed_model`), never its name. A tune job times
each phone untuned and tuned after tuning
(:func:`farm.kinds.tune_model.run_model_tuning`); its raw samples are the tuned
ones, the untuned ones are in its summary's ``runs`` (``untuned_samples_s``),
which :func:`untuned_timings` reads for a ``JOB:untuned`` side.

A label names what was asked, not always what ran. A tune job whose tuning
applied no record (:mod:`farm.tuning.outcome`: ``records_tuned`` 0) timed the
untuned library as its tuned build, and one whose best build is the untuned
one (``records_applied`` 0) left the untuned library as the one ``--tuned N``
builds. :func:`build_in` reads that from the tune job's result
(:attr:`Build.plain`), and :func:`same_library` tells two labels that ran one
library: their difference is the phones' noise, not a build's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from farm.errors import UserFault
from farm.kinds import KINDS
from farm.kinds.base import TimedModel
from farm.queue.records import JobView
from farm.queue.store import Store

__all__ = ["UNTUNED", "Build", "build_in", "build_of", "same_library", "split_ref",
           "untuned_timings"]

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
        label: ``"untuned"`` or ``"tuned by job N"``: what was asked.
        plain: why a tuned label ran the untuned library (``"tune job 6 applied
            no tuning record"``); empty where the label is what ran, or the
            tune job's result does not say.
    """

    identity: str
    label: str
    plain: str = ""

    @property
    def library(self) -> str:
        """The library it ran: ``"untuned"`` where :attr:`plain` says so, else its label."""
        return UNTUNED if self.plain else self.label


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


def _timed(job: JobView) -> TimedModel | None:
    """The model ``job``'s samples time, as its kind says; None for one that times none."""
    kind = KINDS.get(job.kind)
    params = job.spec.get("params")
    if kind is None or kind.timed_model is None or not isinstance(params, Mapping):
        return None
    timed = kind.timed_model(job.id, params)
    return timed if timed is not None and isinstance(timed.model, Mapping) else None


def build_of(job: JobView, untuned: bool = False) -> Build | None:
    """The build ``job`` measured; None for a job that times no model (gemm, a gemm tune).

    Args:
        job: a job whose kind times a model (``model``, ``tune --model``).
        untuned: a model tune job's untuned timings rather than its tuned ones.
    """
    timed = _timed(job)
    if timed is None or not timed.model.get("sha256"):
        return None
    model = timed.model
    shapes = json.dumps(model.get("input_shapes"), sort_keys=True)
    identity = f"sha256={model['sha256']} inputs={shapes} target={model.get('target', 'cpu')}"
    if timed.tuned_by is None or (untuned and timed.own_tuning):
        return Build(identity, UNTUNED)
    return Build(identity, f"tuned by job {timed.tuned_by}")


def _applied_none(summary: Mapping[str, Any], count: str) -> bool:
    """Whether a model tune's ``summary`` says a build of it applies no tuning record.

    ``count`` is ``records_tuned`` (its tuned build, timed at the job's end) or
    ``records_applied`` (its library: ``--tuned N``, the export). A result
    stored before those counts says it by every run's ``same_build``.
    """
    value = summary.get(count)
    if type(value) is int:
        return value == 0
    runs = summary.get("runs")
    return (isinstance(runs, list) and bool(runs)
            and all(isinstance(r, Mapping) and r.get("same_build") is True for r in runs))


def _plain(store: Store, tune_id: int, count: str) -> str:
    """Why tune job ``tune_id``'s build (``count``: :func:`_applied_none`) is the untuned one."""
    results = store.results(tune_id, limit=1)
    summary = results[0].summary if results else {}
    if not _applied_none(summary, count):
        return ""
    if count == "records_applied" and summary.get("records_tuned"):
        return (f"tune job {tune_id} kept the untuned build (its tuned one was not faster), "
                "so its library applies no tuning record")
    return f"tune job {tune_id} applied no tuning record"


def build_in(store: Store, job: JobView, untuned: bool = False) -> Build | None:
    """:func:`build_of`, with :attr:`Build.plain` read from the tuning job's result.

    A ``tune`` job's tuned samples timed its tuned build (``records_tuned``); a
    ``model --tuned N`` job built tune job N's library (``records_applied``).
    A tune job whose result is gone (retention) is taken to have applied records.
    """
    build = build_of(job, untuned)
    timed = _timed(job)
    if build is None or build.label == UNTUNED or timed is None or timed.tuned_by is None:
        return build
    count = "records_tuned" if timed.own_tuning else "records_applied"
    return replace(build, plain=_plain(store, timed.tuned_by, count))


def same_library(a: Build | None, b: Build | None) -> str:
    """Why builds ``a`` and ``b``, labelled apart, ran one library; "" where they may differ.

    Two builds of one label (two untuned runs) are not called the same: what
    they timed may differ in all but the label (another TVM), and comparing
    them is comparing runs.

    >>> plain = Build("m", "tuned by job 6", plain="tune job 6 applied no tuning record")
    >>> same_library(Build("m", UNTUNED), plain).split(": ")[1]
    "tune job 6 applied no tuning record; the difference is the phones' noise, not a build's"
    >>> same_library(Build("m", UNTUNED), Build("m", "tuned by job 6"))
    ''
    """
    if (a is None or b is None or a.identity != b.identity or a.label == b.label
            or a.library != b.library):
        return ""
    why = "; ".join(dict.fromkeys(w for w in (a.plain, b.plain) if w))
    return (f"A and B ran the same library: {why}; the difference is the phones' noise, "
            "not a build's")


def untuned_timings(store: Store, job: JobView) -> dict[str, tuple[float, ...]]:
    """serial -> the untuned seconds per run a tune job measured after tuning.

    Raises:
        UserFault: ``job`` is not a model tune job, or its result has no untuned timings.
    """
    timed = _timed(job)
    if timed is None or not timed.own_tuning:
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
