"""What a job kind declares about itself: one :class:`Kind` per module of this package.

A kind is everything farm needs to know to queue, schedule, run and show one sort
of job; :data:`farm.kinds.KINDS` lists them. Nothing outside this package
branches on a kind's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from pathlib import Path

    from farm.config import JobSettings
    from farm.kinds.run import RunContext
    from farm.queue.capabilities import Requirements
    from farm.queue.records import Outcome
    from farm.queue.spec import JobBase
    from farm.queue.store import Store

__all__ = ["ClickDecorator", "EnqueueCommand", "Kind", "TimedModel", "default_of"]

#: A ``click.option(...)`` decorator.
ClickDecorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclass(frozen=True)
class EnqueueCommand:
    """The kind's ``farmctl enqueue <kind>`` command; farm.cli.enqueue adds the common flags.

    Attributes:
        help: the command's help: one short line, as ``farmctl enqueue --help`` lists it.
        options: ``click.option`` decorators of the kind's own flags; every flag
            defaults to None, meaning "not given: the spec's default applies".
        params: the flags' values by parameter name -> the spec's ``params``
            (values still None are dropped afterwards).
        flags: spec field path -> the flag that sets it, e.g. ``{"params.n": "--n"}``,
            so an error names the flag the user typed.
        check: checks a validated spec against the queue before it is stored
            (``(spec, store, data_dir)``), e.g. that a job it names has finished;
            raises :class:`~farm.errors.SpecError` naming the field. It returns
            the spec to store: None for the one given, or one completed from
            what it read (a model's input shapes from its ``--inputs`` arrays).
        advise: warnings about a spec that ``farmctl enqueue`` queued, from
            the flags' ``params`` (files still on the user's host), each one
            line: a spec that will run but not as the user expects.
        epilog: more of the command's help, shown under its own ``--help``
            (what its arguments take).
    """

    help: str
    options: Sequence[ClickDecorator]
    params: Callable[[dict[str, Any]], dict[str, Any]]
    flags: Mapping[str, str] = field(default_factory=dict)
    check: Callable[[Any, Store, Path], Any] | None = None
    advise: Callable[[dict[str, Any]], list[str]] | None = None
    epilog: str = ""


@dataclass(frozen=True)
class TimedModel:
    """The model a job's samples time, and which build of it (a kind's ``timed_model`` hook).

    Attributes:
        model: the spec's model parameters (``sha256``, ``input_shapes``, ``target``...).
        tuned_by: the tune job whose records the timed build applies; None: untuned.
        own_tuning: the job tuned the model itself: its samples time its own tuned
            build and its summary keeps the untuned timings too (``JOB:untuned``).
    """

    model: Mapping[str, Any]
    tuned_by: int | None = None
    own_tuning: bool = False


@dataclass(frozen=True)
class Kind:
    """One job kind.

    Attributes:
        name: the spec's ``kind`` and the ``jobs.kind`` column, e.g. ``"gemm"``.
        spec: its pydantic model (a :class:`~farm.queue.spec.JobBase` with
            ``kind: Literal[name]`` and ``params``).
        run: runs a claimed attempt of a validated spec in the attempt's child
            process (``farm.runner.child``) and returns its outcome; raises
            farm's errors, whose class decides the retry.
        lease_s: seconds an attempt holds its phones without a heartbeat, from
            the config's ``[jobs]``.
        timeout_s: the default time limit of one attempt, from the config's ``[jobs]``.
        enqueue: its ``farmctl enqueue`` command.
        workload: a stored spec (JSON) -> a short label for reports, e.g.
            ``"gemm n=512 float32"``; must accept any stored spec of the kind.
        needs: a stored spec (JSON) -> what each of its phones must have
            (:class:`~farm.queue.capabilities.Requirements`: target, work-group
            size, phones of one kind), matched against the phones' facts by the
            scheduler; must accept any JSON without raising.
        fan_out: ``farmctl enqueue <kind> --each`` makes one job per matching
            phone (a benchmark measures each phone alone); False for kinds that
            need several phones at once (tune).
        input_files: spec field paths naming ONNX model files on the user's host,
            e.g. ``("params.path",)``. ``farmctl enqueue`` stores each as a blob in
            the database (:func:`farm.jobs.model_store.store_spec_models`) before
            validation and replaces the field by its siblings ``sha256`` (the
            blob) and ``name`` (the file's name), so a job never reads the user's
            path and any host sharing the database can run it.
        timed_model: ``(job id, the stored spec's params)`` -> the model a job's
            samples time and its build (:class:`TimedModel`), None for a job that
            times no model; what ``farmctl compare`` and an A/B side read
            (:mod:`farm.results.builds`, :mod:`farm.kinds.ab_builds`). Must accept
            any JSON without raising.
        helper_attempts: the stored spec's params -> whether a running job of it
            takes helper attempts on other hosts' idle devices
            (:mod:`farm.queue.helpers`, started by the dispatcher under the kind's
            lease). Must accept any JSON without raising.

    ``timed_model`` and ``helper_attempts`` are hooks the shared layers ask
    instead of a kind's name; None: the kind has none.
    """

    name: str
    spec: type[JobBase]
    run: Callable[[RunContext, Any], Outcome]
    lease_s: Callable[[JobSettings], float]
    timeout_s: Callable[[JobSettings], float]
    enqueue: EnqueueCommand
    workload: Callable[[Mapping[str, Any]], str]
    needs: Callable[[Mapping[str, Any]], Requirements]
    fan_out: bool = False
    input_files: tuple[str, ...] = ()
    timed_model: Callable[[int, Mapping[str, Any]], TimedModel | None] | None = None
    helper_attempts: Callable[[Mapping[str, Any]], bool] | None = None


def default_of(model: type[BaseModel], name: str) -> str:
    """``[default: 10]`` for a flag's help, read from the spec model, so help cannot drift."""
    info = model.model_fields[name]
    value = info.get_default(call_default_factory=True)
    return "[required]" if info.is_required() else f"[default: {value}]"
