"""Turn a claimed job into calls of :mod:`farm.jobs` and an :class:`Outcome`.

The queue's spec (``farm.queue.spec``, pydantic) is mapped to the jobs' plain
parameters (``farm.jobs.params``) here and nowhere else. Each measured run is
preceded by thermal gating of its phone (``gate``), ``repetitions`` times per
phone; every raw sample is kept, tagged with its phone. A tuning job's phones
serve the job's tracker key for its whole run, app crashes healed, and go back
to their own keys after it (:mod:`farm.runner.tune_phones`); they must share
one target, and each then times the tuned and the untuned kernel itself.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from farm.config import Settings
from farm.device.facts import gpu_limits_from
from farm.errors import PhoneFault
from farm.fleet.keys import job_key, phone_key
from farm.jobs import params as jp
from farm.jobs.cache import CompileCache
from farm.queue.records import AttemptView, JobView, Outcome, SnapshotData, TuningData
from farm.queue.spec import GemmJob, JobSpec, ModelJob, TuneJob, parse_spec

__all__ = ["RunContext", "device_facts", "execute", "tune_work_dir"]

COMPILE_CACHE_DIR = "compile-cache"
TUNE_DIR = "tune"
SESSION_TIMEOUT_MIN_S = 60


@dataclass(frozen=True)
class RunContext:
    """Everything one attempt needs.

    Attributes:
        settings: farm's settings (tracker address, data folder).
        job: the claimed job.
        attempt: its running attempt; ``attempt.serials`` are the phones.
        facts: each phone's facts as the store keeps them, by serial.
        gate: waits until a phone is cool and returns its snapshot; called
            before every measured run.
    """

    settings: Settings
    job: JobView
    attempt: AttemptView
    facts: Mapping[str, Mapping[str, Any]]
    gate: Callable[[str], SnapshotData]

    @property
    def cache(self) -> CompileCache:
        """The compile cache shared by every attempt of this host."""
        return CompileCache(Path(self.settings.data_dir) / COMPILE_CACHE_DIR)


def tune_work_dir(data_dir: Path, job_id: int) -> Path:
    """The tuning work folder of a job; reused by its retries, so tuning resumes."""
    return Path(data_dir) / TUNE_DIR / f"job-{job_id}"


def device_facts(serial: str, facts: Mapping[str, Any]) -> jp.DeviceFacts:
    """The jobs' view of a phone from the facts the fleet stored.

    Raises:
        PhoneFault: the phone's ABI is unknown (its facts were never read).
    """
    abis = list(facts.get("abis") or [])
    abi = facts.get("abi") or (abis[0] if abis else None)
    if not abi:
        raise PhoneFault(serial, "no ABI in the phone's facts; it was never set up")
    return jp.DeviceFacts(
        abi=str(abi),
        gpu=str(facts.get("gpu") or ""),
        has_opencl=bool(facts.get("has_opencl", False)),
        has_vulkan=bool(facts.get("has_vulkan", False)),
        cpu_features=tuple(facts.get("cpu_features") or ()),
        num_cores=int(facts.get("num_cores") or 0),
        gpu_limits=gpu_limits_from(facts.get("gpu_limits")),
    )


def _tracker(ctx: RunContext, serial: str, key: str | None = None) -> jp.TrackerParams:
    tracker = ctx.settings.tracker
    return jp.TrackerParams(
        host=tracker.host,
        port=tracker.port,
        key=key or phone_key(tracker.key, serial),
        session_timeout_s=max(SESSION_TIMEOUT_MIN_S, int(ctx.job.timeout_s)),
        serial=serial,
    )


def _gemm_params(p: Any) -> jp.GemmParams:
    return jp.GemmParams(
        n=p.n, dtype=p.dtype, bn=p.bn, device=jp.DeviceKind(p.target),
        timing=jp.TimingParams(p.number, p.repeat, p.min_repeat_ms),
    )


def _target(serial: str, ctx: RunContext, device: jp.DeviceKind) -> dict[str, Any]:
    from farm.jobs.targets import target_for

    return target_for(device_facts(serial, ctx.facts.get(serial, {})), device)


def _summary_of_runs(kind: str, runs: Sequence[dict[str, Any]], samples: Sequence[float]) -> dict[str, Any]:
    return {
        "kind": kind,
        "mean_s": statistics.fmean(samples) if samples else None,
        "median_s": statistics.median(samples) if samples else None,
        "samples": len(samples),
        "runs": list(runs),
    }


def _measure(
    ctx: RunContext, repetitions: int, device: jp.DeviceKind,
    run_one: Callable[[jp.TrackerParams, dict[str, Any], int], Any],
    describe: Callable[[Any], dict[str, Any]],
) -> tuple[list[float], list[str], list[dict[str, Any]], list[SnapshotData]]:
    """Each repetition on each phone: gate, run, keep every sample with its phone.

    Returns:
        samples (seconds), the serial of each sample, one summary per run, and
        the thermal snapshot taken before each run.
    """
    samples: list[float] = []
    serials: list[str] = []
    runs: list[dict[str, Any]] = []
    snapshots: list[SnapshotData] = []
    for repetition in range(repetitions):
        for serial in ctx.attempt.serials:
            target = _target(serial, ctx, device)
            snapshots.append(ctx.gate(serial))
            result = run_one(_tracker(ctx, serial), target, repetition)
            samples += result.samples_s
            serials += [serial] * len(result.samples_s)
            runs.append({
                "serial": serial, "repetition": repetition, "mean_s": result.mean_s,
                "max_abs_err": result.max_abs_err,
                "threads": asdict(result.threads) if result.threads else None,
                "target": result.target, **describe(result),
            })
    return samples, serials, runs, snapshots


def _run_gemm(ctx: RunContext, spec: GemmJob) -> Outcome:
    from farm.jobs.gemm import gemm_flop, run_gemm

    params = _gemm_params(spec.params)
    samples, serials, runs, snapshots = _measure(
        ctx, spec.repetitions, params.device,
        lambda tracker, target, rep: run_gemm(params, target, tracker, ctx.cache, seed=rep),
        lambda result: {"gflops": result.gflops},
    )
    summary = _summary_of_runs("gemm", runs, samples)
    summary.update(n=params.n, dtype=params.dtype, bn=params.bn, device=params.device.value)
    summary["gflops"] = gemm_flop(params.n) / summary["mean_s"] / 1e9
    return Outcome(summary, samples, "s", serials, snapshots)


def _model_params(p: Any) -> jp.ModelParams:
    shapes = None if p.input_shapes is None else {k: tuple(v) for k, v in p.input_shapes.items()}
    return jp.ModelParams(
        model_path=Path(p.path), input_shapes=shapes, device=jp.DeviceKind("cpu"),
        rtol=p.tolerance.rtol, atol=p.tolerance.atol,
        timing=jp.TimingParams(number=p.number, repeat=p.repeat),
    )


def _run_model(ctx: RunContext, spec: ModelJob) -> Outcome:
    from farm.jobs.model import run_model

    params = _model_params(spec.params)
    samples, serials, runs, snapshots = _measure(
        ctx, spec.repetitions, params.device,
        lambda tracker, target, _rep: run_model(params, target, tracker, ctx.cache),
        lambda result: {"model_sha256": result.model_sha256},
    )
    summary = _summary_of_runs("model", runs, samples)
    summary["model"] = Path(params.model_path).name
    return Outcome(summary, samples, "s", serials, snapshots)


def _tuning_records(work_dir: Path, workload: str, target: dict[str, Any]) -> list[TuningData]:
    from farm.jobs.tune_records import RECORDS_FILE

    path = work_dir / RECORDS_FILE
    if not path.is_file():
        return []
    target_text = json.dumps(target, sort_keys=True)
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            index, record = json.loads(line)
            records.append(TuningData(workload, target_text, {"workload_index": index, "record": record}))
    return records


def _run_tune(ctx: RunContext, spec: TuneJob) -> Outcome:
    from farm.jobs.gemm import gemm_flop
    from farm.jobs.targets import shared_target
    from farm.jobs.tune import compare_tuned, tune_gemm
    from farm.jobs.tune_progress import TuneProgress
    from farm.runner.tune_phones import serving_job_key

    gemm = _gemm_params(spec.params.gemm)  # the spec refuses tuning a model
    serials = list(ctx.attempt.serials)
    # MetaSchedule measures each candidate on whichever phone of the key is free,
    # into one database: one target, from the facts every phone shares.
    target = shared_target({serial: _target(serial, ctx, gemm.device) for serial in serials})
    # The job's key, which only its phones serve while the job runs
    # (farm.fleet.keys); farm.runner.tune_phones moves the apps to it and back.
    key = job_key(ctx.settings.tracker.key, ctx.job.id)
    work_dir = tune_work_dir(ctx.settings.data_dir, ctx.job.id)
    params = jp.TuneParams(
        gemm=gemm, trials=spec.params.trials, work_dir=work_dir,
        trials_per_iter=spec.params.trials_per_batch, runner_workers=len(serials),
    )
    progress = TuneProgress(work_dir)  # counters across this job's attempts
    snapshots = [ctx.gate(serial) for serial in serials]
    with serving_job_key(ctx.settings, serials, ctx.job.id, on_relaunch=progress.add_relaunch):
        result = tune_gemm(params, target, _tracker(ctx, serials[0], key), progress)
    # Back on their own keys, each phone times both kernels: every sample keeps
    # the serial that produced it.
    comparisons = []
    for serial in serials:
        snapshots.append(ctx.gate(serial))
        comparisons.append(compare_tuned(params, target, _tracker(ctx, serial), result))
    untuned = [s for c in comparisons for s in c.untuned_samples_s]
    tuned = [s for c in comparisons for s in c.tuned_samples_s]
    summary = result.to_dict()
    summary.update(
        kind="tune", n=gemm.n, dtype=gemm.dtype, phones=serials,
        app_relaunches=list(progress.counters.app_relaunches),
        runs=[c.to_dict() for c in comparisons],
        untuned_samples_s=untuned, tuned_samples_s=tuned,
        speedup=statistics.fmean(untuned) / statistics.fmean(tuned),
        tuned_gflops=gemm_flop(gemm.n) / statistics.fmean(tuned) / 1e9,
    )
    tuned_serials = [c.serial for c in comparisons for _ in c.tuned_samples_s]
    workload = f"gemm n={gemm.n} dtype={gemm.dtype}"
    return Outcome(summary, tuned, "s", tuned_serials, snapshots,
                   _tuning_records(work_dir, workload, target))


def execute(ctx: RunContext) -> Outcome:
    """Run the claimed job on its phones and return what it produced.

    Raises:
        UserFault: the spec cannot run (SpecError, CompileError, ToolMissing).
        PhoneFault: a phone, its app or the session failed (SessionError ...),
            or a phone stayed too hot.
        InfraFault: the tracker is unreachable.
    """
    spec: JobSpec = parse_spec(ctx.job.spec)
    if isinstance(spec, GemmJob):
        return _run_gemm(ctx, spec)
    if isinstance(spec, ModelJob):
        return _run_model(ctx, spec)
    return _run_tune(ctx, spec)
