"""``farmctl enqueue gemm|model|tune``: build a job spec from flags and store it.

Only the flags given go into the spec; everything else takes the spec's
defaults (:mod:`farm.queue.spec`), and the spec's validation names the field
of any bad value (``Error: params.n: Input should be greater than or equal to 16``).
The job is durable once this prints its id, whether or not farmd runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from farm.cli.output import echo_json
from farm.cli.state import CliState, pass_state, warn_if_no_farmd
from farm.clock import SystemClock
from farm.errors import SpecError, UserFault
from farm.queue.scheduler import DeviceView
from farm.queue.spec import parse_spec
from farm.queue.waiting import refusal

__all__ = ["enqueue", "parse_input_shape"]


def _prune(data: dict[str, Any]) -> dict[str, Any]:
    """Drop flags that were not given (None, empty tuples) so the spec's defaults apply."""
    return {k: v for k, v in data.items() if v is not None and v != ()}


def _common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Device selection and scheduling flags every kind shares."""
    options = [
        click.option("--serial", "serials", multiple=True, help="Run on this phone (repeatable)."),
        click.option("--abi", help="Phones with this ABI, e.g. arm64-v8a."),
        click.option("--soc", help="Phones with this SoC, e.g. SM8150."),
        click.option("--sdk-min", type=int, help="Phones with at least this SDK level."),
        click.option("--gpu", help="Phones whose GPU name contains this, e.g. adreno."),
        click.option("--count", type=int, help="Phones the job holds at once."),
        click.option("--priority", type=int, help="Higher runs first (-1000..1000)."),
        click.option("--attempts", type=int, help="Attempts at most, the first included."),
        click.option("--timeout", "timeout_s", type=float, help="Seconds one attempt may run."),
        click.option("--not-before", help="Start no earlier than this ISO 8601 time (UTC if naive)."),
        click.option("--repeat", "repetitions", type=int,
                     help="Measured runs, each after thermal gating."),
        click.option("--wait-for-device", is_flag=True,
                     help="Queue it even if no known phone can run it (phones to be plugged in)."),
        click.option("--json", "as_json", is_flag=True, help="Print the stored job as JSON."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _submit(state: CliState, kind: str, params: dict[str, Any], common: dict[str, Any]) -> None:
    as_json = common.pop("as_json")
    wait_for_device = common.pop("wait_for_device")
    devices = _prune({
        "serials": list(common.pop("serials")) or None, "abi": common.pop("abi"),
        "soc": common.pop("soc"), "sdk_min": common.pop("sdk_min"), "gpu": common.pop("gpu"),
        "count": common.pop("count"),
    })
    spec: dict[str, Any] = {"kind": kind, "params": _prune(params), **_prune(common)}
    if devices:
        spec["devices"] = devices
    parsed = parse_spec(spec)
    if not wait_for_device:
        known = state.store.list_devices()
        reason = refusal(parsed, [DeviceView(d.serial, d.state, d.drained, d.facts) for d in known])
        if reason is not None:
            raise UserFault(f"no known phone can run this job: {reason} "
                            "(--wait-for-device queues it for phones not plugged in yet)")
    job_id = state.store.enqueue(parsed, SystemClock().now())
    job = state.store.get_job(job_id)
    if as_json:
        echo_json(job)
    else:
        click.echo(f"job {job_id} queued ({kind})")
    warn_if_no_farmd(state, f"job {job_id} waits in the queue until farmd starts")


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


@click.group()
def enqueue() -> None:
    """Queue a job: gemm, model or tune."""


_gemm_flags = [
    click.option("--n", type=int, help="Matrix side N (C[N,N] = A[N,N] @ B[N,N])."),
    click.option("--dtype", help="float32 or float16."),
    click.option("--bn", type=int, help="Block (tile) size; must divide N."),
    click.option("--target", type=click.Choice(["cpu", "opencl", "vulkan"]), help="Processor."),
]


def _with(flags: list[Callable[..., Any]]) -> Callable[..., Any]:
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for flag in reversed(flags):
            func = flag(func)
        return func

    return decorate


_timing_flags = [
    click.option("--number", type=int, help="Runs averaged into one sample (time_evaluator number)."),
    click.option("--samples", type=int, help="Timed samples per run (time_evaluator repeat)."),
]


@enqueue.command()
@_with(_gemm_flags + _timing_flags)
@click.option("--min-repeat-ms", type=int, help="Lower bound on one sample's duration, ms.")
@_common_options
@pass_state
def gemm(state: CliState, n: int | None, dtype: str | None, bn: int | None, target: str | None,
         number: int | None, samples: int | None, min_repeat_ms: int | None, **common: Any) -> None:
    """Time an N x N GEMM on the phone's CPU or GPU."""
    params = {"n": n, "dtype": dtype, "bn": bn, "target": target, "number": number,
              "repeat": samples, "min_repeat_ms": min_repeat_ms}
    _submit(state, "gemm", params, common)


@enqueue.command()
@click.option("--model", "path", help="The ONNX file on this host.")
@click.option("--input-shape", "input_shapes", multiple=True, help="NAME=D1,D2,... (repeatable).")
@click.option("--rtol", type=float, help="Relative tolerance against onnxruntime.")
@click.option("--atol", type=float, help="Absolute tolerance against onnxruntime.")
@_with(_timing_flags)
@_common_options
@pass_state
def model(state: CliState, path: str | None, input_shapes: tuple[str, ...],
          rtol: float | None, atol: float | None, number: int | None, samples: int | None,
          **common: Any) -> None:
    """Time an ONNX model and check its output against onnxruntime."""
    tolerance = _prune({"rtol": rtol, "atol": atol})
    params = {"path": path, "input_shapes": parse_input_shape(input_shapes),
              "tolerance": tolerance or None, "number": number, "repeat": samples}
    _submit(state, "model", params, common)


@enqueue.command()
@_with(_gemm_flags)
@click.option("--trials", type=int, help="Measured trials wanted in total.")
@click.option("--trials-per-batch", type=int, help="Candidates built and measured per round.")
@click.option("--phones", type=int, help="Phones measuring candidates in parallel.")
@_common_options
@pass_state
def tune(state: CliState, n: int | None, dtype: str | None, bn: int | None, target: str | None,
         trials: int | None, trials_per_batch: int | None, phones: int | None,
         **common: Any) -> None:
    """Tune a gemm with MetaSchedule across phones."""
    params: dict[str, Any] = {
        "gemm": _prune({"n": n, "dtype": dtype, "bn": bn, "target": target}),
        "trials": trials, "trials_per_batch": trials_per_batch, "phones": phones,
    }
    _submit(state, "tune", params, common)
