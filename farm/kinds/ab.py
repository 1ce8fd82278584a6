"""The ``ab`` kind: two builds of one workload timed in turns on one phone until they decide.

``farmctl enqueue ab A B`` (sides: :mod:`farm.kinds.ab_builds`) builds both,
loads both in one session per phone and times them in alternating rounds
(:mod:`farm.jobs.ab`): the drift between two runs taken at different times
(heat, other load, the governor) hits both alike and cancels in each round's
ratio B/A, so a phone that shares its CPU or heats up still tells a 5%
slowdown from none. The verdict per phone (slower, faster, no change,
undecided with the reason) comes from the rounds' ratios
(:func:`farm.stats.compare_rounds`).

Every sample is kept with its phone, its build (``arm``) and its round; the
phone's readings are taken (and the thermal gate passed) before the first
round and every ``[ab] snapshot_every_s`` after; the summary says per phone
which rounds each reading preceded.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click
from pydantic import Field

from farm.errors import SpecError
from farm.kinds.ab_builds import AbBuild, Resolved, parse_build, resolve, side_label
from farm.kinds.base import EnqueueCommand, Kind, default_of
from farm.queue.capabilities import Requirements, workload_needs
from farm.queue.spec import JobBase, Strict

if TYPE_CHECKING:
    from farm.clock import Clock
    from farm.jobs import params as jp
    from farm.kinds.model import ModelBenchSpec
    from farm.kinds.run import RunContext
    from farm.queue.records import Outcome
    from farm.queue.store import Store

__all__ = ["KIND", "METHOD", "AbJob", "AbParams"]

#: How the verdict is reached, as the summary and the pages name it.
METHOD = ("median of per-round ratios B/A; order-statistic (sign-test) CI of the median; "
          "Wilcoxon signed-rank p")


class AbParams(Strict):
    """Two builds (``a`` the baseline, ``b`` the one judged) and how they are compared.

    Attributes:
        a, b: the sides (:class:`~farm.kinds.ab_builds.AbBuild`).
        target: the processor model sides run on; GEMM sides carry their own.
        threshold: the smallest change that counts (0.05 = 5%); None: ``[results]``.
        max_phone_s: phone time at most per phone, seconds; None: ``[ab]``.
        order: ``abba`` or ``random``; None: ``[ab]``.
        seed: the coin of ``random`` order.
    """

    a: AbBuild
    b: AbBuild
    target: Literal["cpu", "opencl", "cuda"] = "cpu"
    threshold: float | None = Field(default=None, gt=0, lt=1)
    max_phone_s: float | None = Field(default=None, gt=0, le=86_400)
    order: Literal["abba", "random"] | None = None
    seed: int = Field(default=0, ge=0, le=2**31 - 1)


class AbJob(JobBase):
    """Time two builds in interleaved rounds on each phone."""

    kind: Literal["ab"]
    params: AbParams


def _sides(spec: AbJob, store: Store | None) -> tuple[Resolved, Resolved]:
    """Both sides resolved and checked to be of one sort.

    Raises:
        SpecError: a side cannot be resolved; one is a GEMM and the other a
            model; two GEMMs for different processors.
    """
    p = spec.params
    a = resolve(p.a, p.target, store, "params.a")
    b = resolve(p.b, p.target, store, "params.b")
    if (a.gemm is None) != (b.gemm is None):
        raise SpecError("params.b", f"A is {a.label} and B is {b.label}: "
                                    "compare a GEMM with a GEMM, a model with a model")
    if a.gemm is not None and b.gemm is not None and a.gemm.target != b.gemm.target:
        raise SpecError("params.b", f"A runs on {a.gemm.target} and B on {b.gemm.target}")
    return a, b


def check(spec: AbJob, store: Store, data_dir: Path) -> None:
    """At enqueue: both sides resolve, are of one sort, and models take the same inputs.

    Model sides are checked as model jobs are (:func:`farm.kinds.model.check_model`:
    shapes, ``--tuned`` fits), and must take inputs of the same names, shapes
    and types, since both run on the same input.

    Raises:
        SpecError: naming the side (``params.a``/``params.b``) at fault.
    """
    from farm.kinds.model import ModelJob, check_model

    a, b = _sides(spec, store)
    if a.model is None or b.model is None:
        return
    for name, side in (("params.a", a), ("params.b", b)):
        job = ModelJob(kind="model", params=side.model)
        try:
            check_model(job, store, data_dir)
        except SpecError as exc:
            raise SpecError(name, f"{side.label}: {exc.reason}") from None
    inputs_a, inputs_b = (_graph_inputs(m, store, data_dir) for m in (a.model, b.model))
    if inputs_a != inputs_b:
        raise SpecError("params.b", f"A and B take different inputs: {a.label} takes "
                                    f"{_said(inputs_a)}, {b.label} takes {_said(inputs_b)}")


def _graph_inputs(model: ModelBenchSpec, store: Store,
                  data_dir: Path) -> list[tuple[str, tuple[int, ...], str]]:
    """A model side's inputs as built: (name, shape, dtype) each, in the graph's order."""
    from farm.jobs.model import load_model
    from farm.kinds.model import model_file

    path = model_file(model, store, data_dir)
    shapes = None if model.input_shapes is None else {
        k: tuple(v) for k, v in model.input_shapes.items()}
    _, inputs = load_model(path, shapes, model.shown_name)
    return [(i.name, tuple(i.shape), i.dtype) for i in inputs]


def _said(inputs: list[tuple[str, tuple[int, ...], str]]) -> str:
    return ", ".join(f"{name} {dtype}{list(shape)}" for name, shape, dtype in inputs)


def _plain(side: Resolved, ctx: RunContext, field: str) -> jp.GemmParams | jp.ModelParams:
    """The jobs' plain parameters of a resolved side, on this host."""
    from farm.jobs.tuning_db import tune_work_dir
    from farm.kinds.gemm import gemm_params
    from farm.kinds.model import model_file, model_params

    if side.gemm is not None:
        return gemm_params(side.gemm)
    model = side.model
    if model is None:
        raise SpecError(field, f"{side.label} has no build")
    path = model_file(model, ctx.store, Path(ctx.settings.data_dir), f"{field}.model.sha256")
    database_dir = None if model.tuned is None else tune_work_dir(ctx.settings.data_dir,
                                                                  model.tuned)
    return model_params(model, path, model.target, database_dir)


class _Readings:
    """A ``before_round`` hook: the phone's readings (and the thermal gate) before round 0.

    Then again every ``[ab] snapshot_every_s``; ``at_rounds`` says which rounds
    they preceded.
    """

    def __init__(self, ctx: RunContext, serial: str, snapshots: list[Any], clock: Clock) -> None:
        self.ctx, self.serial, self.snapshots, self.clock = ctx, serial, snapshots, clock
        self.at_rounds: list[int] = []
        self._last_s = float("-inf")

    def __call__(self, index: int) -> None:
        if self.clock.monotonic() - self._last_s >= self.ctx.settings.ab.snapshot_every_s:
            self.snapshots.append(self.ctx.gate(self.serial))
            self.at_rounds.append(index)
            self._last_s = self.clock.monotonic()


def run(ctx: RunContext, spec: AbJob) -> Outcome:
    """Each phone of the attempt in turn: both builds, one session, rounds until decided."""
    from dataclasses import replace

    from farm.clock import SystemClock
    from farm.jobs.ab import AbRule, run_ab
    from farm.kinds.run import phone_target, tracker_params
    from farm.queue.records import Outcome
    from farm.sampling import SamplingRule

    p = spec.params
    sides = _sides(spec, ctx.store)
    builds = [_plain(side, ctx, name) for side, name in zip(sides, ("params.a", "params.b"),
                                                             strict=True)]
    rule = AbRule.of(ctx.settings.ab, ctx.settings.results)
    rule = replace(rule, threshold=p.threshold or rule.threshold,
                   max_phone_s=p.max_phone_s or rule.max_phone_s, order=p.order or rule.order,
                   seed=p.seed)
    sampling = SamplingRule.of(ctx.settings.results)
    clock = SystemClock()
    samples: list[float] = []
    serials: list[str] = []
    arms: list[str] = []
    rounds: list[int] = []
    snapshots: list[Any] = []
    per_serial: dict[str, dict[str, Any]] = {}
    for serial in ctx.attempt.serials:
        readings = _Readings(ctx, serial, snapshots, clock)
        target = phone_target(serial, ctx, builds[0].device)
        result = run_ab(builds[0], builds[1], target, tracker_params(ctx, serial), ctx.cache,
                        rule, sampling, before_round=readings)
        taken = result.rounds
        for index, (a_s, b_s, first) in enumerate(zip(taken.a_s, taken.b_s, taken.first,
                                                      strict=True)):
            pair = [("a", a_s), ("b", b_s)] if first == "a" else [("b", b_s), ("a", a_s)]
            for arm, value in pair:
                samples.append(value)
                serials.append(serial)
                arms.append(arm)
                rounds.append(index)
        c = taken.comparison
        per_serial[serial] = {
            "verdict": c.verdict.value, "reason": c.reason, "ratio": c.ratio,
            "ci_low": c.ci_low, "ci_high": c.ci_high, "p_value": c.p_value,
            "rounds": len(taken.a_s), "decided_at": taken.decided_at,
            "stopped_by": taken.stopped_by, "looks": taken.looks,
            "phone_s": taken.phone_s, "number": taken.number,
            "median_a_s": statistics.median(taken.a_s),
            "median_b_s": statistics.median(taken.b_s),
            "warmup_runs": taken.warmup.runs, "warmup_steady": taken.warmup.steady,
            "same_library": result.same_library,
            "max_abs_err_a": result.max_abs_err_a, "max_abs_err_b": result.max_abs_err_b,
            "readings_at_rounds": readings.at_rounds,
        }
    only = next(iter(per_serial.values())) if len(per_serial) == 1 else {}
    summary = {
        "kind": "ab", "a": sides[0].label, "b": sides[1].label,
        "threshold": rule.threshold, "alpha": rule.alpha, "confidence": rule.confidence,
        "order": rule.order, "method": METHOD, "per_serial": per_serial,
        "verdict": only.get("verdict"), "ratio": only.get("ratio"),
        "samples": len(samples),
    }
    return Outcome(summary, samples, "s", serials, snapshots, sample_arms=arms,
                   sample_rounds=rounds)


def workload(spec: Mapping[str, Any]) -> str:
    """``ab gemm n=256 float32 vs gemm n=260 float32``, from the spec alone."""
    params = spec.get("params")
    params = params if isinstance(params, Mapping) else {}
    a, b = (params.get(name) for name in ("a", "b"))
    return (f"ab {side_label(a) if isinstance(a, Mapping) else '?'} vs "
            f"{side_label(b) if isinstance(b, Mapping) else '?'}")


def needs(spec: Mapping[str, Any]) -> Requirements:
    """What each phone must have: the GEMMs' processor and work-group, or the models' processor."""
    params = spec.get("params")
    params = params if isinstance(params, Mapping) else {}
    gemms = [side.get("gemm") for side in (params.get("a"), params.get("b"))
             if isinstance(side, Mapping) and isinstance(side.get("gemm"), Mapping)]
    if gemms:
        return max((workload_needs(g) for g in gemms), key=lambda r: r.work_group_threads)
    return workload_needs({"target": params.get("target", "cpu")})


def _params(values: dict[str, Any]) -> dict[str, Any]:
    from farm.kinds.model import parse_input_shape

    a = parse_build(values["a"], "params.a")
    b = parse_build(values["b"], "params.b")
    if values["tuned"] is not None:
        b["tuned"] = values["tuned"]
    shapes = parse_input_shape(values["input_shapes"], "params.a.model.input_shapes")
    for side in (a, b):  # both model files run on one input
        if shapes is not None and "model" in side:
            side["model"]["input_shapes"] = shapes
    return {"a": a, "b": b, "target": values["target"],
            "threshold": values["threshold"], "max_phone_s": values["max_phone_s"],
            "order": values["order"], "seed": values["seed"]}


KIND = Kind(
    name="ab",
    spec=AbJob,
    run=run,
    lease_s=lambda jobs: jobs.lease_s,
    timeout_s=lambda jobs: jobs.model_timeout_s,
    enqueue=EnqueueCommand(
        help="Time two builds in turns: is B slower than A?",
        epilog="A and B are each a build: gemm:n=256[,bn=16,dtype=float16,target=cpu], an "
               "ONNX file, a finished job's id (its build; a model tune's tuned build) or "
               "N:untuned (a model tune's untuned build). Both are loaded in one session per "
               "phone and timed in alternating rounds until B is called slower, faster or no "
               "change against A, or --max-phone-s runs out (undecided, with the reason).",
        options=[
            click.argument("a"),
            click.argument("b"),
            click.option("--tuned", type=int,
                         help="B is a model file: apply this finished tune job's records to it."),
            click.option("--input-shape", "input_shapes", multiple=True,
                         help="NAME=D1,D2,... for model files' inputs, both sides (repeatable; "
                              "a symbolic batch needs one).  [default: the model's own]"),
            click.option("--target", type=click.Choice(["cpu", "opencl", "cuda"]),
                         help=f"Processor of model sides. {default_of(AbParams, 'target')}"),
            click.option("--threshold", type=float,
                         help="Smallest change that counts (0.05 = 5%).  "
                              "[default: results.change_threshold]"),
            click.option("--max-phone-s", type=float,
                         help="Phone time at most per phone, seconds.  [default: ab.max_phone_s]"),
            click.option("--order", type=click.Choice(["abba", "random"]),
                         help="Which build goes first in each round.  [default: ab.order]"),
            click.option("--seed", type=int, help="Seed of --order random. "
                                                  f"{default_of(AbParams, 'seed')}"),
        ],
        params=_params,
        check=check,
        flags={"params.a": "A", "params.b": "B", "params.b.tuned": "--tuned",
               "params.a.model.input_shapes": "--input-shape",
               "params.b.model.input_shapes": "--input-shape",
               "params.target": "--target", "params.threshold": "--threshold",
               "params.max_phone_s": "--max-phone-s", "params.order": "--order",
               "params.seed": "--seed"},
    ),
    workload=workload,
    needs=needs,
    fan_out=True,
    input_files=("params.a.model.path", "params.b.model.path"),
)
