"""The ``tune`` kind's model half: tune an ONNX model's tasks, then time it on each phone.

Not a kind of its own: :func:`farm.kinds.tune.run` sends a spec with
``params.model`` here. The tuning runs with the job's phones serving the job's
tracker key (:func:`farm.kinds.serve_keys.serving_job_key`), like the GEMM's;
afterwards each phone, back on its own key and thermally gated, times the model
compiled without and with the tuning database (:func:`farm.jobs.model.run_model`),
each output checked against onnxruntime, in ``jobs.tune_timing_rounds``
interleaved rounds (:func:`farm.sampling.interleaved_rounds`), so both medians
come from the same rounds. The tuned samples are the job's raw
samples, each with the serial that produced it. Where the tuned build is not
faster than the untuned one (the phones' median speedup), the job reports the
untuned build as its best and its library becomes the untuned build
(:func:`farm.tuning.model.keep_untuned`); where the tuned build applies no
tuning record it is the untuned build, with no speed-up (:mod:`farm.tuning.outcome`
decides, and says why).

The tuning starts from the fleet's best records for the phones' model
(:func:`attempt_records`, :mod:`farm.tuning.fleet_records`); every record is
kept in the fleet's records after the batch that measured it, and the whole
work folder again when the attempt ends, succeeded or not, so a retry on
another host resumes from them.
Its tasks are rows in the database (:mod:`farm.tuning.work_progress`): claimed by
the attempt, their trials reported after every batch, and the tuned build
claimed once per job. A helper attempt of the job on another host
(:mod:`farm.queue.helpers`) tunes the rows it claims and ends there: no build,
no timing, and the store keeps no result of it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from farm.clock import SystemClock
from farm.errors import StoreError

if TYPE_CHECKING:
    from pathlib import Path

    from farm.jobs import params as jp
    from farm.kinds.run import RunContext
    from farm.kinds.tune import TuneModelSpec, TuneSpec
    from farm.queue.records import Outcome
    from farm.queue.store import Store
    from farm.tuning import BestRecords, Decision, ModelTuneResult, TailPrice, TuneProgress
    from farm.tuning.fleet_records import RecordCheckpoint

__all__ = ["attempt_progress", "attempt_records", "record_checkpoint", "run_model_tuning",
           "serving_priced", "since_start_s"]

log = structlog.get_logger(__name__)


def attempt_progress(ctx: RunContext, work_dir: Path) -> TuneProgress:
    """The attempt's progress; with a store, the job's task rows too.

    With a store it is a :class:`farm.tuning.work_progress.TaskWorkProgress`,
    which reaches the rows through the store (the engine's ``TaskRows``).
    Either counts the attempt from its start in the queue (``ctx.attempt.started_at``:
    :meth:`farm.tuning.progress.TuneProgress.started_before`), so a time budget
    (``--for``) covers the child's start and all that precedes the tuning.

    The job's main attempt shares its tasks (claims about half) when helpers
    are on (``jobs.tune_helpers``) and another host has a device a helper of
    the job could hold (``Store.helper_may_come``: the filter the helper's own
    claim uses, :mod:`farm.queue.helpers`).
    """
    from farm.tuning import TuneProgress
    from farm.tuning.work_progress import TaskWorkProgress

    progress: TuneProgress
    if ctx.store is None:
        progress = TuneProgress(work_dir)
    else:
        jobs = ctx.settings.jobs
        helper = ctx.attempt.helper
        share = jobs.tune_helpers and not helper and _helper_may_come(ctx, ctx.store)
        progress = TaskWorkProgress(work_dir, ctx.store, ctx.job.id, ctx.attempt.id,
                                    ctx.settings.host_id, helper=helper, share=share,
                                    poll_s=jobs.tune_task_poll_s, wait_s=jobs.tune_lease_s,
                                    helper_wait_s=jobs.tune_helper_wait_s)
    progress.started_before(since_start_s(ctx.attempt.started_at, SystemClock().now()))
    return progress


def since_start_s(started_at: datetime, now: datetime) -> float:
    """Seconds from an attempt's start (a naive time is UTC, as SQLite returns it) to ``now``.

    >>> from datetime import timedelta
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> since_start_s(t.replace(tzinfo=None), t + timedelta(seconds=7))
    7.0
    """
    start = started_at if started_at.tzinfo else started_at.replace(tzinfo=UTC)
    return max(0.0, (now - start).total_seconds())


def _helper_may_come(ctx: RunContext, store: Store) -> bool:
    """Whether another host has a device a helper of the job could hold (False if unread)."""
    try:
        return store.helper_may_come(ctx.attempt.id, SystemClock().now())
    except StoreError as exc:
        log.warning("helpers_not_read", job_id=ctx.job.id, reason=str(exc))
        return False


@contextmanager
def attempt_records(ctx: RunContext, work_dir: Path, labels: Mapping[int, str],
                    stem: str) -> Iterator[BestRecords | None]:
    """The fleet's best records for the attempt's phones' model; the work folder's kept at the end.

    Kept whether or not the tuning ends well: its measured records are the
    fleet's either way. Without a store (a run outside farmd), neither.

    Args:
        ctx: the attempt; its first phone's facts give the device model.
        work_dir: the job's tuning work folder.
        labels: each workload index's label, read at the end (filled in by the caller).
        stem: the label of an index ``labels`` lacks, e.g. ``"tune model m.onnx"``.
    """
    from farm.queue.capabilities import device_model
    from farm.tuning.fleet_records import best_records, keep_work_dir

    if ctx.store is None:
        yield None
        return
    model = device_model(ctx.facts.get(ctx.attempt.serials[0], {}))
    try:
        yield best_records(ctx.store, model)
    finally:
        keep_work_dir(ctx.store, work_dir, model, ctx.job.id, ctx.attempt.id,
                      lambda index: labels.get(index, stem), SystemClock().now())



def record_checkpoint(ctx: RunContext, work_dir: Path, stem: str) -> RecordCheckpoint | None:
    """The attempt's checkpoint into the fleet's records; None without a store."""
    from farm.queue.capabilities import device_model
    from farm.tuning.fleet_records import RecordCheckpoint

    if ctx.store is None:
        return None
    return RecordCheckpoint(ctx.store, work_dir,
                            device_model(ctx.facts.get(ctx.attempt.serials[0], {})),
                            ctx.job.id, ctx.attempt.id, stem)


@contextmanager
def serving_priced(ctx: RunContext, serials: list[str], progress: TuneProgress,
                   tail: TailPrice) -> Iterator[str]:
    """The job's key served for the block, ``tail`` the progress's with handing it back priced.

    Handing the key back costs what taking it did (:attr:`TailPrice.release_s`);
    a helper attempt (``progress.builds`` false) has no tail.

    Yields:
        The job's tracker key (:func:`farm.kinds.serve_keys.serving_job_key`).
    """
    from farm.kinds.serve_keys import serving_job_key

    clock = SystemClock()
    from_s = clock.monotonic()
    with serving_job_key(ctx, serials, on_relaunch=progress.add_relaunch) as key:
        if progress.builds:
            progress.set_tail(replace(tail, release_s=clock.monotonic() - from_s))
        yield key


def _time_builds(
    ctx: RunContext, serial: str, plain: Any, target: dict[str, Any], work_dir: Any,
    snapshots: list[Any], on_run: Callable[[], None],
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Time ``serial``'s untuned and tuned builds in interleaved rounds, each gated first.

    Each round runs :func:`farm.jobs.model.run_model` on both, with its share of
    the ``[results]`` sampling (:meth:`farm.sampling.SamplingRule.per_round`),
    in ``jobs.tune_timing_rounds`` rounds (:func:`farm.sampling.interleaved_rounds`);
    ``on_run`` is called after each run (the ETA prices the runs left from it).

    Returns:
        The last :class:`farm.jobs.model.ModelResult` of each (``"untuned"``,
        ``"tuned"``), and each one's samples of all rounds.
    """
    from farm.jobs.model import run_model
    from farm.kinds.run import tracker_params
    from farm.sampling import SamplingRule, interleaved_rounds

    rounds = ctx.settings.jobs.tune_timing_rounds
    sampling = SamplingRule.of(ctx.settings.results).per_round(rounds)
    timed: dict[str, Any] = {}

    def timer(name: str, database_dir: Any) -> Callable[[], list[float]]:
        def once() -> list[float]:
            snapshots.append(ctx.gate(serial))
            timed[name] = run_model(replace(plain, database_dir=database_dir), target,
                                    tracker_params(ctx, serial), ctx.cache, sampling=sampling)
            on_run()
            return list(timed[name].samples_s)
        return once

    sampled = interleaved_rounds({"untuned": timer("untuned", None),
                                  "tuned": timer("tuned", work_dir)}, rounds)
    return timed, sampled


def run_model_tuning(ctx: RunContext, spec: TuneSpec, model: TuneModelSpec) -> Outcome:
    """Tune ``model`` on the attempt's phones (resuming earlier attempts), then time it.

    Args:
        ctx: the attempt.
        spec: the validated ``params`` of the tune spec.
        model: ``spec.model``.

    Returns:
        The outcome: summary (``target``, ``model_sha256``, ``input_shapes``,
        ``tasks``, ``phones``, ``runs`` with each phone's ``untuned_s`` and
        ``tuned_s`` medians; ``best_build``, ``best_note``, ``speedup`` (the
        phones' median; None where the tuned build applied no record),
        ``records_tuned`` and ``records_applied`` (:mod:`farm.tuning.outcome`);
        ``picks_checked``, ``picks_used`` and ``picks_unchecked``;
        ``model_tasks``; ``stopped_by``, ``first_trial_s``,
        ``trials_per_phone_hour`` and its ``limit_per_phone_hour``), the
        tuned samples with their serials, the snapshots of every gate, and
        every tuning record labelled by its task; ``imported`` says when the
        model was imported simplified.

    Raises:
        SpecError, CompileError, ToolMissing: the model cannot be tuned or built.
        PhoneFault, SessionError, TrackerUnreachable: a phone or session failed.
    """
    from farm.jobs import params as jp
    from farm.jobs.targets import shared_target
    from farm.jobs.tuning_db import tune_work_dir
    from farm.kinds.model import model_file, model_params
    from farm.kinds.run import phone_target, tracker_params
    from farm.kinds.tune import _tuning_records, held_tune_builders
    from farm.queue.records import Outcome
    from farm.sampling import SamplingRule
    from farm.tuning import TailPrice, tune_model
    from farm.tuning.work_progress import build_made

    path = model_file(model, ctx.store, ctx.settings.data_dir, "params.model.sha256")
    plain = replace(model_params(model, path), device=jp.DeviceKind(model.target))
    shown = model.shown_name
    serials = list(ctx.attempt.serials)
    target = shared_target({s: phone_target(s, ctx, plain.device) for s in serials})
    work_dir = tune_work_dir(ctx.settings.data_dir, ctx.job.id)
    params = jp.TuneParams(
        gemm=None, model=plain, trials=spec.trials or ctx.settings.jobs.tune_model_trials,
        work_dir=work_dir, trials_per_iter=spec.trials_per_batch, runner_workers=len(serials),
        trials_per_task=spec.trials_per_task, max_tasks=spec.max_tasks,
        for_s=ctx.settings.jobs.tune_model_for_s if spec.for_s is None else spec.for_s,
        pipeline=ctx.settings.jobs.tune_pipeline,
    )
    progress = attempt_progress(ctx, work_dir)  # counters across attempts; the job's task rows
    # The ETA is of the job's result, and --for bounds it: the timing after the build too.
    tail = TailPrice.of(len(serials), ctx.settings.jobs.tune_timing_rounds,
                        SamplingRule.of(ctx.settings.results), plain.timing.min_repeat_ms / 1e3)
    snapshots = [ctx.gate(serial) for serial in serials]
    labels: dict[int, str] = {}
    with attempt_records(ctx, work_dir, labels, f"tune model {shown}") as fleet, serving_priced(
            ctx, serials, progress, tail) as key, build_made(
            progress), held_tune_builders(ctx) as builders:
        result = tune_model(replace(params, builder_workers=builders), target,
                            tracker_params(ctx, serials[0], key), ctx.cache, progress, fleet,
                            record_checkpoint(ctx, work_dir, f"tune model {shown}"))
        labels.update({t.workload_index: f"tune model {shown} {t.name}" for t in result.tasks})
    if not progress.builds:  # a helper attempt: its tasks' records are kept; no result
        return Outcome({**result.to_dict(), "kind": "tune", "model": shown, "phones": serials,
                        "helper": True}, [], "s", [], snapshots, ())
    runs: list[dict[str, Any]] = []
    tuned_samples: list[float] = []
    tuned_serials: list[str] = []
    imported: str | None = None
    # The untuned and tuned figures are sampled as a model job's are (warm-up,
    # then until the median is known), so `compare N:untuned N` can decide; in
    # interleaved rounds, each its share of the samples, so the load hits both alike.
    progress.set_phase("timing the untuned and tuned builds")
    progress.enter_stage("timing")
    for serial in serials:
        timed, sampled = _time_builds(ctx, serial, plain, target, work_dir, snapshots,
                                      lambda: progress.enter_stage("timing"))
        untuned_s, tuned_s = sampled["untuned"], sampled["tuned"]
        runs.append({
            "serial": serial,
            "untuned_s": statistics.median(untuned_s), "tuned_s": statistics.median(tuned_s),
            "speedup": statistics.median(untuned_s) / statistics.median(tuned_s),
            "untuned_samples_s": untuned_s, "tuned_samples_s": tuned_s,
            "max_abs_err": timed["tuned"].max_abs_err,
            "same_build": timed["tuned"].library == timed["untuned"].library,
        })
        tuned_samples += tuned_s
        tuned_serials += [serial] * len(tuned_s)
        imported = timed["untuned"].imported  # the simplification note, if any
    summary = result.to_dict()
    decision = _decide(result, runs)
    if decision.best_build == "untuned":
        _keep_untuned(plain, target, work_dir, ctx)
    counters = progress.counters
    summary.update(
        **decision.to_summary(),
        kind="tune", model=shown, phones=serials,
        input_shapes={i.name: list(i.shape) for i in result.inputs},
        attempts=counters.attempts, rounds=counters.rounds, batches=counters.batches,
        app_relaunches=list(counters.app_relaunches), runs=runs, imported=imported,
    )
    summary["tasks"] = [{"name": t["name"], "trials": t["trials"], "best_s": t["best_s"],
                         "trials_measured": t["trials_measured"],
                         "workload_index": t["workload_index"]} for t in summary["tasks"]]
    progress.finish(f"done: the {decision.best_build} build is the best")
    stored = () if ctx.store is not None else _tuning_records(
        work_dir, lambda index: labels.get(index, f"tune model {shown}"), target)
    return Outcome(summary, tuned_samples, "s", tuned_serials, snapshots, stored)


def _decide(result: ModelTuneResult, runs: list[dict[str, Any]]) -> Decision:
    """The best build from the tuning and the phones' timings (:mod:`farm.tuning.outcome`).

    Where every phone timed one library as both builds, each run's ``speedup``
    becomes None: no tuned build exists. The tuned build's records are the
    picks used on CPU targets (the check keeps a record only where it beat
    the default), else each task's best record.
    """
    from farm.tuning import decide, searched_trials

    same_build = all(r["same_build"] for r in runs)
    speedup = statistics.median(r["speedup"] for r in runs)
    records = (result.picks_used if result.picks_used is not None
               else sum(t.trials_measured > 0 for t in result.tasks))
    searched = searched_trials([{"trials_measured": t.trials_measured} for t in result.tasks],
                               baselines=result.picks_checked is not None)
    for run in runs if same_build else ():  # one library timed twice: no speed-up
        run["speedup"] = None
    return decide(speedup, same_build=same_build, records_tuned=0 if same_build else records,
                  picks_checked=result.picks_checked, picks_unchecked=result.picks_unchecked,
                  searched=searched)


def _keep_untuned(plain: jp.ModelParams, target: dict[str, Any], work_dir: Path,
                  ctx: RunContext) -> None:
    """Make the untuned build the job's library (:func:`farm.tuning.model.keep_untuned`)."""
    from farm.jobs.ndk import linker_for
    from farm.tuning import keep_untuned

    keep_untuned(plain, target, work_dir, ctx.cache, linker_for(target))
