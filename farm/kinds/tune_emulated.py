"""The ``tune`` kind on emulated devices: one batch through the path, outputs checked, no ranking.

:func:`farm.kinds.tune.run` sends an attempt whose devices are all emulated
(:func:`emulated_attempt`, a board under QEMU) here instead of tuning it
(:mod:`farm.tuning.emulated` says why). The tuning runs as on any device,
the job's key served by its devices, but for one batch of candidates, without
the fleet's records (none read, none kept) and without the picks check; then
each device runs what the tuning built, its output checked against numpy (a
GEMM) or onnxruntime (a model). A model's library, export and ``--tuned``
builds are the untuned build: no record ranked by the emulator's timings is
applied. The result stores no tuning record; its summary says ``emulated``,
``outputs_matched`` and, in ``emulated_note``, the one line ``farmctl job``
shows (:func:`farm.tuning.outcome.outcome_lines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.tuning.emulated import emulated_devices, emulated_note, path_check_params

if TYPE_CHECKING:
    from farm.kinds.run import RunContext
    from farm.kinds.tune import TuneJob, TuneModelSpec, TuneSpec
    from farm.queue.records import Outcome
    from farm.queue.store import Store

__all__ = ["emulated_attempt", "refuse_mixed", "run_gemm_check", "run_model_check"]


def emulated_attempt(ctx: RunContext) -> bool:
    """Whether the attempt's devices are emulated (all of them; none: False).

    Raises:
        SpecError: some are and some are not (farmd plans no such attempt:
            a tune's devices are of one model).
    """
    return emulated_devices({s: ctx.facts.get(s, {}) for s in ctx.attempt.serials})


def refuse_mixed(serials: Sequence[str] | None, store: Store) -> None:
    """At enqueue: named devices that mix emulated and real ones are refused.

    Devices the store does not know yet are left to the scheduler.

    Raises:
        SpecError: on ``devices.serials``, one line naming both sides.
    """
    facts = {s: d.facts for s in serials or () if (d := store.get_device(s)) is not None}
    emulated_devices(facts)


def run_gemm_check(ctx: RunContext, spec: TuneJob) -> Outcome:
    """Tune the GEMM for one batch on the emulated devices; each checks both libraries' C.

    Returns:
        The outcome: the tuning's summary with ``runs`` (each device's
        ``max_abs_err`` of the tuned and the untuned library), ``emulated``,
        ``outputs_matched``, ``emulated_note``; no sample, no tuning record.

    Raises:
        CompileError: no candidate was measured, or a library's C differs from numpy.
        PhoneFault, SessionError, TrackerUnreachable: a device or session failed.
    """
    from farm.kinds.run import tracker_params
    from farm.kinds.tune import tune_gemm_on
    from farm.queue.records import Outcome
    from farm.tuning.emulated import check_gemm_library
    from farm.tuning.gemm import FUNC_NAME

    tuning = tune_gemm_on(ctx, spec, path_check_params)
    gemm, serials, target = tuning.gemm, tuning.serials, tuning.target
    progress, snapshots, result = tuning.progress, tuning.snapshots, tuning.result
    runs = []
    for serial in serials:
        snapshots.append(ctx.gate(serial))
        errors = {name: check_gemm_library(Path(library), gemm, target,
                                           tracker_params(ctx, serial), FUNC_NAME)
                  for name, library in (("tuned", result.tuned_library),
                                        ("untuned", result.untuned_library))}
        runs.append({"serial": serial, "max_abs_err": max(errors.values()), "emulated": True})
    note = emulated_note(serials)
    summary = result.to_dict()
    summary.update(kind="tune", n=gemm.n, dtype=gemm.dtype, phones=serials, runs=runs,
                   app_relaunches=list(progress.counters.app_relaunches),
                   **_unranked(serials, note))
    progress.finish(f"done: {note}")
    return Outcome(summary, (), "s", (), snapshots, ())


def run_model_check(ctx: RunContext, spec: TuneSpec, model: TuneModelSpec) -> Outcome:
    """Tune ``model`` for one batch on the emulated devices; each runs the build it made.

    The build made from the work folder's records is run on each device and
    its outputs compared with onnxruntime (:func:`farm.jobs.model.run_model`);
    then the job's library becomes the untuned build
    (:func:`farm.tuning.model.keep_untuned`), so nothing later applies a record.

    Returns:
        The outcome: the tuning's summary with ``runs`` (each device's
        ``max_abs_err`` and ``samples_s``, the emulator's), ``best_build``
        ``"untuned"`` with ``emulated_note`` as its ``best_note``, no
        speed-up, no record applied, ``emulated``, ``outputs_matched``; the
        samples with their serials; no tuning record.

    Raises:
        SpecError, CompileError, ToolMissing: the model cannot be tuned or built,
            or an output differs from onnxruntime.
        PhoneFault, SessionError, TrackerUnreachable: a device or session failed.
    """
    from farm.jobs import params as jp
    from farm.jobs.model import run_model
    from farm.jobs.ndk import linker_for
    from farm.jobs.targets import shared_target
    from farm.jobs.tuning_db import tune_work_dir
    from farm.kinds.model import model_file, model_params
    from farm.kinds.run import phone_target, tracker_params
    from farm.kinds.tune import held_tune_builders
    from farm.kinds.tune_model import attempt_progress, serving_priced
    from farm.queue.records import Outcome
    from farm.sampling import SamplingRule
    from farm.tuning import TailPrice
    from farm.tuning.model import keep_untuned, tune_model
    from farm.tuning.work_progress import build_made

    path = model_file(model, ctx.store, ctx.settings.data_dir, "params.model.sha256")
    plain = replace(model_params(model, path), device=jp.DeviceKind(model.target))
    serials = list(ctx.attempt.serials)
    target = shared_target({s: phone_target(s, ctx, plain.device) for s in serials})
    work_dir = tune_work_dir(ctx.settings.data_dir, ctx.job.id)
    params = path_check_params(jp.TuneParams(
        gemm=None, model=plain, trials=spec.trials or ctx.settings.jobs.tune_model_trials,
        work_dir=work_dir, trials_per_iter=spec.trials_per_batch, runner_workers=len(serials),
        trials_per_task=spec.trials_per_task, max_tasks=spec.max_tasks,
        for_s=ctx.settings.jobs.tune_model_for_s if spec.for_s is None else spec.for_s,
        pipeline=ctx.settings.jobs.tune_pipeline))
    progress = attempt_progress(ctx, work_dir)
    # What follows the tuning, kept from --for: an output check per device (priced as a
    # tune job's timing of its two builds, which the check's run and keep_untuned's build
    # make up) and handing the key back.
    tail = TailPrice.of(len(serials), 1, SamplingRule.of(ctx.settings.results),
                        plain.timing.min_repeat_ms / 1e3)
    snapshots = [ctx.gate(serial) for serial in serials]
    with serving_priced(ctx, serials, progress, tail) as key, build_made(
            progress), held_tune_builders(ctx) as builders:
        result = tune_model(replace(params, builder_workers=builders), target,
                            tracker_params(ctx, serials[0], key), ctx.cache, progress)
    shown = model.shown_name
    if not progress.builds:  # a helper attempt: it tuned its tasks; nothing is kept
        return Outcome({**result.to_dict(), "kind": "tune", "model": shown, "phones": serials,
                        "helper": True}, [], "s", [], snapshots, ())
    progress.set_phase("checking the outputs")
    runs: list[dict[str, Any]] = []
    samples: list[float] = []
    sample_serials: list[str] = []
    for serial in serials:
        snapshots.append(ctx.gate(serial))
        ran = run_model(replace(plain, database_dir=work_dir), target,
                        tracker_params(ctx, serial), ctx.cache)
        runs.append({"serial": serial, "max_abs_err": ran.max_abs_err,
                     "samples_s": list(ran.samples_s), "emulated": True})
        samples += ran.samples_s
        sample_serials += [serial] * len(ran.samples_s)
    keep_untuned(plain, target, work_dir, ctx.cache, linker_for(target))
    note = emulated_note(serials)
    summary = result.to_dict()
    summary.update(
        kind="tune", model=shown, phones=serials, runs=runs,
        input_shapes={i.name: list(i.shape) for i in result.inputs},
        best_build="untuned", best_note=note, records_tuned=0, records_applied=0,
        **_unranked(serials, note))
    summary["tasks"] = [{"name": t["name"], "trials": t["trials"],
                         "trials_measured": t["trials_measured"],
                         "workload_index": t["workload_index"]} for t in summary["tasks"]]
    progress.finish(f"done: {note}")
    return Outcome(summary, samples, "s", sample_serials, snapshots, ())


def _unranked(serials: Sequence[str], note: str) -> dict[str, Any]:
    """The summary fields of a tune that ranked nothing: no speed-up, no best time."""
    return {"emulated": True, "outputs_matched": True, "emulated_note": note, "speedup": None,
            "tuned_gflops": None, "best_record_s": None,
            "per_serial": {s: {"emulated": True} for s in serials}}
