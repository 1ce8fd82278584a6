"""``farmctl enqueue <kind>``: build a job spec from flags and store it.

One command per job kind, made from the kind's own flags
(:class:`farm.kinds.base.EnqueueCommand`) and the flags every kind shares
(devices, priority, attempts, timeout...). Only the flags given go into the
spec; everything else takes the spec's defaults, and a job's time limit not
given takes the config's default for its kind.

A bad value is refused in the words of the flag that gave it, with exit code 2
and nothing stored: ``Error: --n is required``, ``Error: --bn: block size 12
does not divide --n 512``. The job is durable once this prints its id, whether
or not farmd runs.

``--each`` (kinds that measure each phone alone: gemm, model) fans out: one job
per phone in service that matches, pinned to it by ``devices.serials``, all
under one new run id (``r-`` + 12 hex), stored in one transaction or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import click

from farm.api.service import Submitted
from farm.cli.output import echo_json, note
from farm.cli.state import CliState, pass_state, warn_if_no_farmd
from farm.controllers import kinds as controller_kinds
from farm.errors import SpecError
from farm.kinds import KINDS, Kind
from farm.kinds.base import ClickDecorator, default_of
from farm.queue.spec import (
    MAX_ATTEMPTS,
    MAX_PHONES,
    MAX_PRIORITY,
    DeviceSelection,
    JobBase,
)

__all__ = ["COMMON_FLAGS", "FlagError", "enqueue", "flag_error"]

#: Spec field path -> the flag every kind shares that sets it.
COMMON_FLAGS = {
    "devices.serials": "--serial",
    "devices.abi": "--abi",
    "devices.soc": "--soc",
    "devices.sdk_min": "--sdk-min",
    "devices.gpu": "--gpu",
    "devices.kind": "--kind",
    "devices.count": "--count",
    "priority": "--priority",
    "attempts": "--attempts",
    "timeout_s": "--timeout",
    "not_before": "--not-before",
    "repetitions": "--repeat",
}
_DEVICE_FIELDS = ("serials", "abi", "soc", "sdk_min", "gpu", "kind", "count")

_COMMON_OPTIONS: list[ClickDecorator] = [
    click.option("--serial", "serials", multiple=True, help="Run on this phone (repeatable)."),
    click.option("--abi", help="Phones with this ABI, e.g. arm64-v8a."),
    click.option("--soc", help="Phones with this SoC, e.g. SM8150."),
    click.option("--sdk-min", type=int, help="Phones with at least this SDK level."),
    click.option("--gpu", help="Phones whose GPU name contains this, e.g. adreno."),
    click.option("--kind", "kind", type=click.Choice(controller_kinds()),
                 help="Devices of this kind only. [default: any kind]"),
    click.option("--count", type=int, help=f"Phones the job holds at once (1..{MAX_PHONES}). "
                                           f"{default_of(DeviceSelection, 'count')}"),
    click.option("--priority", type=int,
                 help=f"Higher runs first (-{MAX_PRIORITY}..{MAX_PRIORITY}). "
                      f"{default_of(JobBase, 'priority')}"),
    click.option("--attempts", type=int,
                 help=f"Attempts at most, the first included (1..{MAX_ATTEMPTS}). "
                      f"{default_of(JobBase, 'attempts')}"),
    click.option("--timeout", "timeout_s", type=float,
                 help="Seconds one attempt may run.  [default: the config's, per kind]"),
    click.option("--not-before", help="Start no earlier than this ISO 8601 time (UTC if naive)."),
    click.option("--repeat", "repetitions", type=int,
                 help="Measured runs per phone, each after thermal gating. "
                      f"{default_of(JobBase, 'repetitions')}"),
    click.option("--wait-for-device", is_flag=True,
                 help="Queue it even if no known phone can run it (phones to be plugged in)."),
    click.option("--json", "as_json", is_flag=True, help="Print the stored job as JSON."),
]
_COMMON_NAMES = ("serials", *_DEVICE_FIELDS[1:], "priority", "attempts", "timeout_s",
                 "not_before", "repetitions", "wait_for_device", "as_json")


class FlagError(click.ClickException):
    """A flag's value makes a spec that cannot run: ``Error: --n is required``, exit 2."""

    exit_code = 2


def _prune(data: Mapping[str, Any]) -> dict[str, Any]:
    """Drop flags that were not given (None, empty tuples), at every depth.

    A group left empty stays: ``tune`` without flags still names its gemm, so
    the error is ``--n is required``, not a missing workload.
    """
    return {
        key: _prune(value) if isinstance(value, Mapping) else value
        for key, value in data.items()
        if value is not None and value != ()
    }


def flag_error(error: SpecError, flags: Mapping[str, str]) -> FlagError:
    """A spec error in the words of the flags (``params.n`` -> ``--n``).

    Args:
        error: from :func:`farm.queue.spec.parse_spec`.
        flags: spec field path -> flag, the kind's and :data:`COMMON_FLAGS`.

    Returns:
        The error naming the flag of the field, or of the nearest field above
        it (``devices.serials.0`` -> ``--serial``); the dotted path when no
        flag sets it. Other fields in the reason, written ``name=value`` by the
        spec, become ``--flag value`` too.
    """
    path = error.field.split(".")
    flag = next(
        (flags[".".join(path[:i])] for i in range(len(path), 0, -1) if ".".join(path[:i]) in flags),
        error.field,
    )
    siblings = {field.rsplit(".", 1)[-1]: f for field, f in flags.items()}
    reason = re.sub(
        r"\b([a-z_]+)=", lambda m: f"{siblings[m[1]]} " if m[1] in siblings else m[0], error.reason
    )
    if reason == "Field required":
        return FlagError(f"{flag} is required")
    return FlagError(f"{flag}: {reason}")


_EACH: ClickDecorator = click.option("--each", is_flag=True,
                     help="One job per phone in service that matches, all under one run id "
                          "(results per phone, never pooled); --count is for jobs that need "
                          "several phones at once.")


def _submit(state: CliState, kind: Kind, params: dict[str, Any], common: dict[str, Any]) -> None:
    as_json = common.pop("as_json")
    wait_for_device = common.pop("wait_for_device")
    each = bool(common.pop("each", False))
    common["serials"] = list(common["serials"]) or None
    devices = _prune({name: common.pop(name) for name in _DEVICE_FIELDS})
    raw: dict[str, Any] = {"kind": kind.name, "params": _prune(params), **_prune(common)}
    if devices:
        raw["devices"] = devices
    queue = state.queue
    try:
        raw = queue.store_inputs(raw)  # --inputs FILE.npz: a blob too (uploaded with --server)
        # The model files go into the database first: the spec names the blobs.
        done = queue.submit(queue.store_models(raw, kind.input_files),
                            wait_for_device=wait_for_device, each=each)
    except SpecError as exc:
        raise flag_error(exc, {**COMMON_FLAGS, **kind.enqueue.flags}) from None
    if done.run_id is not None:
        _said_each(done, kind, as_json)
        warn_if_no_farmd(state, f"run {done.run_id} waits in the queue until farmd starts")
        return
    [job] = done.jobs
    if as_json:
        echo_json(job)
    else:
        click.echo(f"job {job.id} queued ({kind.name})")
    for line in [] if kind.enqueue.advise is None else kind.enqueue.advise(params):
        note(f"warning: {line}")
    warn_if_no_farmd(state, f"job {job.id} waits in the queue until farmd starts")


def _said_each(done: Submitted, kind: Kind, as_json: bool) -> None:
    """Print a fan-out: its run id and each job's phone."""
    if done.skipped:
        count = len(done.skipped)
        note(f"skipped {count} reserved phone{'s' if count != 1 else ''} (a reserved phone "
             "takes no job until its reservation ends): " + "; ".join(done.skipped))
    if as_json:
        echo_json({"run_id": done.run_id, "jobs": list(done.jobs), "skipped": list(done.skipped)})
        return
    click.echo(f"run {done.run_id}: {len(done.jobs)} jobs queued ({kind.name}, one per phone)")
    for job in done.jobs:
        click.echo(f"  job {job.id} on {job.spec['devices']['serials'][0]}")


def _command(kind: Kind) -> click.Command:
    """``farmctl enqueue <kind>``: the kind's flags, then the common ones."""

    @pass_state
    def submit(state: CliState, /, **values: Any) -> None:
        common = {name: values.pop(name) for name in (*_COMMON_NAMES, "each") if name in values}
        try:
            params = kind.enqueue.params(values)
        except SpecError as exc:
            raise flag_error(exc, {**COMMON_FLAGS, **kind.enqueue.flags}) from None
        _submit(state, kind, params, common)

    func: Callable[..., Any] = submit
    options: list[ClickDecorator] = [*kind.enqueue.options, *_COMMON_OPTIONS]
    if kind.fan_out:
        options.append(_EACH)
    for option in reversed(options):
        func = option(func)
    return click.command(kind.name, help=kind.enqueue.help,
                         epilog=kind.enqueue.epilog or None)(func)


@click.group()
def enqueue() -> None:
    """Queue a job of one of the kinds below."""


for _kind in KINDS.values():
    enqueue.add_command(_command(_kind))
