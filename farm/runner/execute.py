"""Run a claimed job: its kind's runner (:data:`farm.kinds.KINDS`) and what runners share.

:func:`execute` validates the stored spec and calls its kind's ``run``; each
kind maps its spec to the jobs' plain parameters (``farm.jobs.params``) in its
own module. The helpers here serve every kind: :func:`measure` gates each
measured run thermally (``gate``), ``repetitions`` times per phone, and keeps
every raw sample tagged with its phone; :func:`tracker_params` and
:func:`phone_target` say where a phone's session comes from and what it
compiles for.
 They must share one
target (tune), and each times its own runs, so every sample keeps its serial.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from farm.config import Settings
from farm.device.facts import gpu_limits_from
from farm.errors import PhoneFault
from farm.fleet.keys import phone_key
from farm.jobs import params as jp
from farm.jobs.cache import CompileCache
from farm.kinds import kind_of
from farm.queue.records import AttemptView, JobView, Outcome, SnapshotData
from farm.queue.spec import parse_spec

__all__ = [
    "RunContext",
    "device_facts",
    "execute",
    "measure",
    "phone_target",
    "summary_of_runs",
    "tracker_params",
    "tune_work_dir",
]

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


def tracker_params(ctx: RunContext, serial: str, key: str | None = None) -> jp.TrackerParams:
    """Where a session to ``serial`` comes from: its own tracker key, or ``key``."""
    tracker = ctx.settings.tracker
    return jp.TrackerParams(
        host=tracker.host,
        port=tracker.port,
        key=key or phone_key(tracker.key, serial),
        session_timeout_s=max(SESSION_TIMEOUT_MIN_S, int(ctx.job.timeout_s)),
        serial=serial,
    )


def phone_target(serial: str, ctx: RunContext, device: jp.DeviceKind) -> dict[str, Any]:
    """The TVM target of ``device`` on the phone ``serial``, from its facts."""
    from farm.jobs.targets import target_for

    return target_for(device_facts(serial, ctx.facts.get(serial, {})), device)


def summary_of_runs(
    kind: str, runs: Sequence[dict[str, Any]], samples: Sequence[float]
) -> dict[str, Any]:
    """A timed job's summary: mean and median of every sample (seconds), and each run."""
    return {
        "kind": kind,
        "mean_s": statistics.fmean(samples) if samples else None,
        "median_s": statistics.median(samples) if samples else None,
        "samples": len(samples),
        "runs": list(runs),
    }


def measure(
    ctx: RunContext, repetitions: int, device: jp.DeviceKind,
    run_one: Callable[[jp.TrackerParams, dict[str, Any], int], Any],
    describe: Callable[[Any], dict[str, Any]],
) -> tuple[list[float], list[str], list[dict[str, Any]], list[SnapshotData]]:
    """Each repetition on each phone: gate, run, keep every sample with its phone.

    Args:
        ctx: the attempt.
        repetitions: measured runs per phone.
        device: the processor the runs use.
        run_one: runs once: (tracker, target, repetition) -> a result with
            ``samples_s``, ``mean_s``, ``max_abs_err``, ``threads``, ``target``.
        describe: a result -> the kind's own fields of its run summary.

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
            target = phone_target(serial, ctx, device)
            snapshots.append(ctx.gate(serial))
            result = run_one(tracker_params(ctx, serial), target, repetition)
            samples += result.samples_s
            serials += [serial] * len(result.samples_s)
            runs.append({
                "serial": serial, "repetition": repetition, "mean_s": result.mean_s,
                "max_abs_err": result.max_abs_err,
                "threads": asdict(result.threads) if result.threads else None,
                "target": result.target, **describe(result),
            })
    return samples, serials, runs, snapshots


def execute(ctx: RunContext) -> Outcome:
    """Run the claimed job on its phones and return what it produced.

    Raises:
        UserFault: the spec cannot run (SpecError, also for a kind this farm
            does not know; CompileError, ToolMissing).
        PhoneFault: a phone, its app or the session failed (SessionError ...),
            or a phone stayed too hot.
        InfraFault: the tracker is unreachable.
    """
    spec = parse_spec(ctx.job.spec)
    return kind_of(spec.kind).run(ctx, spec)
