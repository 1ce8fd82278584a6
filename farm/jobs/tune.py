"""MetaSchedule tuning of the GEMM workload across every phone serving a tracker key.

A tuning job owns a work folder holding MetaSchedule's JSON database::

    <work_dir>/database_workload.json       one line per workload
    <work_dir>/database_tuning_record.json  one line per measured candidate
    <work_dir>/logs/                        MetaSchedule's own logs
    <work_dir>/tuned.so, untuned.so         the final comparison's libraries

Checkpointing is MetaSchedule's: each measured candidate is appended as one line.
Resuming is farm's: MetaSchedule's task scheduler starts counting trials at 0 even
when the database already holds records, so before a run farm trims a half-written
last line (a kill mid-write), counts the trials already *measured* and asks only
for the rest. A measurement that failed (the app crashed, the session dropped) is
recorded by MetaSchedule with a run time of 1e10 s and does not count, so farm runs
further rounds, up to ``max_rounds``, until the requested number is measured.

Builds run in MetaSchedule's ``LocalBuilder`` worker processes. On a 2-core host
its 30 s default timeout fails every build, because each worker first imports
``tvm.s_tir.tensor_intrin`` (tens of seconds); farm gives it a long timeout and
an ``initializer`` doing those imports once per worker (apache/tvm
``python/tvm/s_tir/meta_schedule/builder/local_builder.py`` documents registering
functions "via initializer"). Candidates are exported as ``.so`` (NDK-linked for
real phones) since the phone's RPC server loads shared libraries.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from farm.errors import CompileError, SessionError, SpecError
from farm.jobs.gemm import gemm_flop, gemm_module
from farm.jobs.ndk import Linker, linker_for
from farm.jobs.params import TrackerParams, TuneParams
from farm.jobs.session import (
    ThreadPoolApplied,
    apply_thread_pool,
    open_session,
    upload_and_load,
)
from farm.jobs.targets import runtime_device_name
from farm.jobs.tvm_errors import reason_of

log = structlog.get_logger(__name__)

WORKLOADS_FILE = "database_workload.json"
RECORDS_FILE = "database_tuning_record.json"

#: MetaSchedule's ``AddToDatabase`` callback stores failed runs with this cost
#: (1e10 s); anything at or above it is a failed measurement.
FAILED_RUN_S = 1e9

#: The function name MetaSchedule's ``compile_tir`` looks the workload up by.
FUNC_NAME = "main"


@dataclass(frozen=True)
class TuneResult:
    """A finished tuning job.

    Attributes:
        trials_requested: measured trials the job asked for in total.
        trials_measured_before: measured trials found in the work folder at start.
        trials_measured: measured trials in the work folder at the end.
        trials_failed: records whose measurement failed (crashes, dropped sessions).
        rounds: MetaSchedule runs this call made.
        best_record_s: the best candidate's mean run time while tuning.
        untuned_samples_s: time_evaluator samples of the unscheduled kernel.
        tuned_samples_s: time_evaluator samples of the best schedule.
        speedup: mean untuned time over mean tuned time.
        tuned_gflops: ``2 N^3 / mean tuned time / 1e9``.
        threads: thread pool settings in force during the comparison.
        work_dir: the work folder.
        target: the target dict.
    """

    trials_requested: int
    trials_measured_before: int
    trials_measured: int
    trials_failed: int
    rounds: int
    best_record_s: float
    untuned_samples_s: list[float]
    tuned_samples_s: list[float]
    speedup: float
    tuned_gflops: float
    threads: ThreadPoolApplied | None
    work_dir: str
    target: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the result."""
        return asdict(self)


# --- the work folder ----------------------------------------------------------------


def repair_database_file(path: Path) -> int:
    """Drop a half-written or unparsable last line of a JSON-lines file.

    A process killed while MetaSchedule appends a record leaves a line without its
    newline (or without its end); MetaSchedule would fail to load the file.

    Args:
        path: a database file; missing files are left alone.

    Returns:
        Bytes removed.
    """
    if not path.is_file():
        return 0
    data = path.read_bytes()
    keep = data if data.endswith(b"\n") or not data else data[: data.rfind(b"\n") + 1]
    lines = keep.splitlines(keepends=True)
    while lines:
        try:
            json.loads(lines[-1])
            break
        except ValueError:
            lines.pop()
    keep = b"".join(lines)
    if len(keep) != len(data):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(keep)
        os.replace(tmp, path)
        log.warning("tuning_records_trimmed", path=str(path), bytes_dropped=len(data) - len(keep))
    return len(data) - len(keep)


def repair_work_dir(work_dir: Path) -> int:
    """Trim both database files of a work folder; return the bytes removed."""
    return repair_database_file(work_dir / WORKLOADS_FILE) + repair_database_file(
        work_dir / RECORDS_FILE
    )


def _run_secs(line: bytes) -> list[float]:
    record = json.loads(line)
    # A record line is [workload_index, [trace, run_secs, target, args_info]].
    run_secs = record[1][1]
    return [float(s) for s in run_secs] if run_secs else []


def count_trials(work_dir: Path) -> tuple[int, int]:
    """Measured and failed trials recorded in a work folder.

    Args:
        work_dir: the tuning work folder (repaired first by the caller).

    Returns:
        ``(measured, failed)``: records with a real run time, and records whose
        measurement failed.
    """
    path = work_dir / RECORDS_FILE
    if not path.is_file():
        return 0, 0
    measured = failed = 0
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        secs = _run_secs(line)
        if secs and all(s < FAILED_RUN_S for s in secs):
            measured += 1
        else:
            failed += 1
    return measured, failed


def export_records(work_dir: Path, out_path: Path) -> Path:
    """Copy a work folder's database (complete lines only) into ``out_path``.

    The copy is itself a MetaSchedule database folder:
    ``tvm.s_tir.meta_schedule.database.JSONDatabase(work_dir=str(out_path))`` loads it.

    Args:
        work_dir: the tuning work folder.
        out_path: folder to create (or refresh).

    Returns:
        ``out_path``.
    """
    repair_work_dir(work_dir)
    out_path.mkdir(parents=True, exist_ok=True)
    for name in (WORKLOADS_FILE, RECORDS_FILE):
        src = work_dir / name
        if src.is_file():
            shutil.copyfile(src, out_path / name)
    return out_path


# --- the builder's worker processes -------------------------------------------------


def builder_initializer() -> None:
    """Run once in each LocalBuilder worker: the slow imports, before any build's timeout."""
    import tvm.s_tir.tensor_intrin
    import tvm.support.ndk  # noqa: F401


@dataclass(frozen=True)
class SoExporter:
    """MetaSchedule ``f_export``: a built candidate to a ``.so`` path (picklable)."""

    linker: Linker

    def __call__(self, module: Any) -> str:
        """Export ``module`` to a fresh temporary ``.so`` and return its path."""
        path = Path(tempfile.mkdtemp(prefix="farm-ms-")) / "tvm_tmp_mod.so"
        module.export_library(str(path), fcompile=self.linker)
        return str(path)


def _cost_model() -> str:
    # The XGBoost cost model needs the optional xgboost package; without it a random
    # model still explores (more slowly) instead of failing at the first update.
    try:
        import xgboost  # noqa: F401
    except ImportError:
        return "random"
    return "xgb"


# --- tuning -------------------------------------------------------------------------


def _tune_round(
    params: TuneParams, target: dict[str, Any], tracker: TrackerParams, linker: Linker, trials: int
) -> None:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    builder = ms.builder.LocalBuilder(
        max_workers=params.builder_workers,
        timeout_sec=params.builder_timeout_s,
        f_export=SoExporter(linker),
        initializer=builder_initializer,
    )
    runner = ms.runner.RPCRunner(
        ms.runner.RPCConfig(
            tracker_host=tracker.host,
            tracker_port=tracker.port,
            tracker_key=tracker.key,
            session_timeout_sec=int(tracker.session_timeout_s),
        ),
        evaluator_config=ms.runner.EvaluatorConfig(
            number=params.timing.number,
            repeat=params.timing.repeat,
            min_repeat_ms=params.timing.min_repeat_ms,
        ),
        max_workers=params.runner_workers,
    )
    mod = gemm_module(params.gemm.n, params.gemm.dtype, name=FUNC_NAME)
    ms.tune_tir(
        mod,
        tvm.target.Target(target),
        str(params.work_dir),
        max_trials_global=trials,
        num_trials_per_iter=min(params.trials_per_iter, trials),
        builder=builder,
        runner=runner,
        cost_model=_cost_model(),
        seed=params.seed,
    )


def _best_record_s(work_dir: Path) -> float:
    best = float("inf")
    path = work_dir / RECORDS_FILE
    for line in path.read_bytes().splitlines() if path.is_file() else []:
        secs = _run_secs(line) if line.strip() else []
        if secs and all(s < FAILED_RUN_S for s in secs):
            best = min(best, float(np.mean(secs)))
    return best


def _compile_pair(params: TuneParams, target: dict[str, Any], linker: Linker) -> tuple[Path, Path]:
    """Compile the best recorded schedule and the unscheduled kernel into the work folder."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    workload = f"gemm n={params.gemm.n} dtype={params.gemm.dtype}"
    mod = gemm_module(params.gemm.n, params.gemm.dtype, name=FUNC_NAME)
    target_obj = tvm.target.Target(target)
    database = ms.database.JSONDatabase(work_dir=str(params.work_dir))
    schedule = ms.tir_integration.compile_tir(database, mod, target_obj)
    if schedule is None:
        raise CompileError(workload, "no measured schedule in the tuning records")
    tuned = params.work_dir / "tuned.so"
    untuned = params.work_dir / "untuned.so"
    try:
        for out, scheduled in ((tuned, schedule.mod), (untuned, mod)):
            tmp = out.with_suffix(".tmp.so")
            tvm.compile(scheduled, target=target_obj).export_library(str(tmp), fcompile=linker)
            os.replace(tmp, out)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise CompileError(workload, reason_of(exc)) from exc
    return tuned, untuned


def _compare(
    params: TuneParams, target: dict[str, Any], tracker: TrackerParams, tuned: Path, untuned: Path
) -> tuple[list[float], list[float], ThreadPoolApplied | None]:
    """Time the untuned and the tuned kernel in one session; return their samples."""
    import tvm

    remote = open_session(tracker)
    device = runtime_device_name(target)
    threads = apply_thread_pool(remote, params.gemm.threads, tracker) if device == "cpu" else None
    rng = np.random.default_rng(0)
    n, dtype = params.gemm.n, params.gemm.dtype
    samples: list[list[float]] = []
    for name, library in (("untuned", untuned), ("tuned", tuned)):
        module = upload_and_load(remote, library, f"{name}-{os.getpid()}.so", tracker)
        try:
            dev = remote.device(device, 0)
            a = tvm.runtime.tensor(rng.random((n, n)).astype(dtype), dev)
            b = tvm.runtime.tensor(rng.random((n, n)).astype(dtype), dev)
            c = tvm.runtime.tensor(np.zeros((n, n), dtype), dev)
            timing = params.gemm.timing
            evaluator = module.time_evaluator(
                FUNC_NAME,
                dev,
                number=timing.number,
                repeat=timing.repeat,
                min_repeat_ms=timing.min_repeat_ms,
            )
            samples.append([float(s) for s in evaluator(a, b, c).results])
        except (RuntimeError, OSError) as exc:
            raise SessionError(tracker.serial or f"key:{tracker.key}", str(exc)) from exc
    return samples[0], samples[1], threads


def tune_gemm(params: TuneParams, target: dict[str, Any], tracker: TrackerParams) -> TuneResult:
    """Tune GEMM until ``params.trials`` trials are measured, then compare with untuned.

    Reusing ``params.work_dir`` resumes: trials measured by earlier (possibly killed)
    runs count towards ``params.trials``.

    Args:
        params: workload, trial budget, work folder, builder and timing settings.
        target: target dict of the phones serving ``tracker.key``.
        tracker: tracker address and the key only this job's phones serve.

    Returns:
        Trial counts, the comparison's raw samples and the speedup.

    Raises:
        SpecError: a CPU target without ``num-cores``.
        ToolMissing: the NDK is needed and missing (checked before anything runs).
        CompileError: no candidate could be built or measured in ``max_rounds`` rounds.
        SessionError, TrackerUnreachable: the final comparison could not get a session.
    """
    if target.get("kind") == "llvm" and not target.get("num-cores"):
        # MetaSchedule sizes parallel loops by it and refuses a CPU target without it.
        raise SpecError("device.num_cores", "tuning a CPU target needs the phone's core count")
    linker = linker_for(target)
    params.work_dir.mkdir(parents=True, exist_ok=True)
    repair_work_dir(params.work_dir)
    before, _ = count_trials(params.work_dir)
    measured, rounds = before, 0
    while measured < params.trials and rounds < params.max_rounds:
        remaining = params.trials - measured
        log.info("tuning_round", round=rounds, measured=measured, remaining=remaining)
        _tune_round(params, target, tracker, linker, remaining)
        rounds += 1
        repair_work_dir(params.work_dir)
        measured, _ = count_trials(params.work_dir)
    measured, failed = count_trials(params.work_dir)
    if measured == 0:
        raise CompileError(
            f"gemm n={params.gemm.n}", f"no trial measured in {rounds} rounds ({failed} failed)"
        )
    tuned, untuned = _compile_pair(params, target, linker)
    untuned_s, tuned_s, threads = _compare(params, target, tracker, tuned, untuned)
    tuned_mean = float(np.mean(tuned_s))
    result = TuneResult(
        trials_requested=params.trials,
        trials_measured_before=before,
        trials_measured=measured,
        trials_failed=failed,
        rounds=rounds,
        best_record_s=_best_record_s(params.work_dir),
        untuned_samples_s=untuned_s,
        tuned_samples_s=tuned_s,
        speedup=float(np.mean(untuned_s)) / tuned_mean,
        tuned_gflops=gemm_flop(params.gemm.n) / tuned_mean / 1e9,
        threads=threads,
        work_dir=str(params.work_dir),
        target=target,
    )
    log.info(
        "tuning_finished",
        measured=measured,
        failed=failed,
        rounds=rounds,
        speedup=round(result.speedup, 3),
    )
    return result
