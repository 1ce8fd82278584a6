"""A tuning job's work folder: where it is, and MetaSchedule's JSON database, repaired and counted.

A job's work folder is ``<data_dir>/tune/job-<id>`` (:func:`tune_work_dir`), reused
by its retries so that tuning resumes::

    <work_dir>/database_workload.json       one line per workload
    <work_dir>/database_tuning_record.json  one line per measured candidate
    <work_dir>/database_tuning_record.unreadable.json
                                            records MetaSchedule could not read
                                            back, set aside (:func:`open_database`)
    <work_dir>/picked/                      the records the tuned build applies
                                            (:mod:`farm.tuning.verify`)

Checkpointing is MetaSchedule's: each measured candidate is appended as one
line. A process killed mid-write leaves a half-written last line, which
:func:`repair_work_dir` trims before anyone loads the files. A measurement
that failed (the app crashed, the session dropped) is recorded by MetaSchedule
with a run time of 1e10 s; :func:`count_trials` tells those apart.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from farm.privacy import write_private

log = structlog.get_logger(__name__)

#: The folder of the data folder that holds the tuning jobs' work folders.
TUNE_DIR = "tune"
WORKLOADS_FILE = "database_workload.json"
RECORDS_FILE = "database_tuning_record.json"
#: Records that MetaSchedule cannot read back, moved out of ``RECORDS_FILE`` by
#: :func:`open_database` (the same JSON lines, kept for a bug report).
UNREADABLE_FILE = "database_tuning_record.unreadable.json"
#: The database of the records that beat farm's default schedules when measured
#: again (:mod:`farm.tuning.verify`), in the work folder.
PICKED_DIR = "picked"
#: The tuned model's library in the work folder (``farmctl export`` copies it);
#: named here, in a module without TVM, so the dashboard can look for it.
TUNED_LIBRARY = "model_tuned.so"

#: MetaSchedule's ``AddToDatabase`` callback stores failed runs with this cost
#: (1e10 s); anything at or above it is a failed measurement.
FAILED_RUN_S = 1e9


def tune_work_dir(data_dir: Path | str, job_id: int) -> Path:
    """The tuning work folder of a job; reused by its retries, so tuning resumes."""
    return Path(data_dir) / TUNE_DIR / f"job-{job_id}"


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
        write_private(path, keep)
        log.warning("tuning_records_trimmed", path=str(path), bytes_dropped=len(data) - len(keep))
    return len(data) - len(keep)


def repair_work_dir(work_dir: Path) -> int:
    """Trim both database files of a work folder; return the bytes removed."""
    return repair_database_file(work_dir / WORKLOADS_FILE) + repair_database_file(
        work_dir / RECORDS_FILE
    )


def open_database(work_dir: Path, allow_missing: bool = True) -> Any:
    """MetaSchedule's ``JSONDatabase`` of ``work_dir``, records it cannot read set aside first.

    ``JSONDatabase`` replays every record's trace on its workload when it opens
    a folder (``TuningRecord::FromJSON``), and one record that does not replay
    fails the whole open. Seen: ``Check failed: old_outputs.size() ==
    new_outputs.size() (3 vs. 4)`` on an ``AddRFactor`` candidate of a global
    pool (docs/benchmarks.md's history, 2026-11-27); the tune job died at its picks'
    check, and each later attempt would have died opening the folder, losing
    the night's records. Where the open fails, each record is read on its own
    (:func:`set_aside_unreadable`), the unreadable ones move to
    :data:`UNREADABLE_FILE`, and the folder is opened again.

    Args:
        work_dir: a MetaSchedule database folder (a tuning work folder).
        allow_missing: as ``JSONDatabase``'s: create the files where they are missing.

    Returns:
        The ``tvm.s_tir.meta_schedule.database.JSONDatabase``.

    Raises:
        RuntimeError, ValueError: MetaSchedule's, where the open fails with every record
            readable (``ValueError`` for a missing file with ``allow_missing`` False).
    """
    from tvm.s_tir import meta_schedule as ms

    try:
        return ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=allow_missing)
    except (RuntimeError, ValueError):
        if not set_aside_unreadable(work_dir):
            raise
    return ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=allow_missing)


def set_aside_unreadable(work_dir: Path) -> int:
    """Move the records MetaSchedule cannot read back to :data:`UNREADABLE_FILE`.

    Each record line is read as ``JSONDatabase`` reads it
    (``TuningRecord.from_json`` on its workload, which replays the trace);
    the readable ones stay in their order. Slower than MetaSchedule's own
    parallel open: :func:`open_database` calls it only where that open failed.

    Returns:
        The records set aside.
    """
    from tvm.s_tir import meta_schedule as ms

    path = work_dir / RECORDS_FILE
    workloads_path = work_dir / WORKLOADS_FILE
    if not path.is_file() or not workloads_path.is_file():
        return 0
    workloads: list[Any] = []
    for line in workloads_path.read_bytes().splitlines():
        try:
            workloads.append(ms.database.Workload.from_json(json.loads(line)))
        except (RuntimeError, ValueError):
            workloads.append(None)  # its records are unreadable too
    keep, unreadable = [], []
    for line in path.read_bytes().splitlines(keepends=True):
        if not line.strip():
            continue
        try:
            index, record = json.loads(line)
            ms.database.TuningRecord.from_json(record, workloads[index])
            keep.append(line.rstrip(b"\n") + b"\n")
        except (RuntimeError, ValueError, TypeError, IndexError):
            unreadable.append(line.rstrip(b"\n") + b"\n")
    if unreadable:
        with (work_dir / UNREADABLE_FILE).open("ab") as out:
            out.write(b"".join(unreadable))
        write_private(path, b"".join(keep))
        log.warning("tuning_records_unreadable", work_dir=str(work_dir), set_aside=len(unreadable),
                    kept=len(keep), file=UNREADABLE_FILE)
    return len(unreadable)


def _run_secs(line: bytes) -> list[float]:
    record = json.loads(line)
    # A record line is [workload_index, [trace, run_secs, target, args_info]].
    run_secs = record[1][1]
    return [float(s) for s in run_secs] if run_secs else []


def _record_lines(work_dir: Path, workload_index: int | None) -> list[bytes]:
    """The record lines of a work folder, those of one workload when an index is given."""
    path = work_dir / RECORDS_FILE
    if not path.is_file():
        return []
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    if workload_index is None:
        return lines
    return [line for line in lines if json.loads(line)[0] == workload_index]


def _measured(secs: list[float]) -> bool:
    return bool(secs) and all(s < FAILED_RUN_S for s in secs)


def count_trials(work_dir: Path, workload_index: int | None = None) -> tuple[int, int]:
    """Measured and failed trials recorded in a work folder.

    Args:
        work_dir: the tuning work folder (repaired first by the caller).
        workload_index: count only the records of this workload (its line in
            ``database_workload.json``, counted from 0); all records when None.

    Returns:
        ``(measured, failed)``: records with a real run time, and records whose
        measurement failed.
    """
    measured = failed = 0
    for line in _record_lines(work_dir, workload_index):
        if _measured(_run_secs(line)):
            measured += 1
        else:
            failed += 1
    return measured, failed


def default_and_best_s(work_dir: Path) -> dict[int, tuple[list[float], list[float]]]:
    """Per workload whose best record is not its first: the first's and the best's run times.

    A task's first measured record is its default schedule
    (:mod:`farm.tuning.baseline` measures it before any search; records
    seeded from the fleet come before it, so then the first is one of those).
    These are the tasks the picks' check measures again
    (:mod:`farm.tuning.check_cost` prices it from their run times).

    Args:
        work_dir: the tuning work folder.

    Returns:
        ``{workload index: (first record's run_secs, best record's run_secs)}``.
    """
    first: dict[int, list[float]] = {}
    best: dict[int, tuple[float, list[float]]] = {}
    for line in _record_lines(work_dir, None):
        record = json.loads(line)
        secs = _run_secs(line)
        if not _measured(secs):
            continue
        index, mean_s = int(record[0]), float(np.mean(secs))
        first.setdefault(index, secs)
        if index not in best or mean_s < best[index][0]:
            best[index] = (mean_s, secs)
    return {i: (first[i], best[i][1]) for i in first if best[i][1] is not first[i]}


def workload_hashes(work_dir: Path) -> list[str]:
    """Each line's structural hash in ``database_workload.json``, by line ("" for a blank one).

    A workload line is ``[shash, module]`` (MetaSchedule's ``Workload.as_json``);
    a record names its workload by this line number, so the list's index is that number.
    """
    path = work_dir / WORKLOADS_FILE
    lines = path.read_bytes().splitlines() if path.is_file() else []
    return [str(json.loads(line)[0]) if line.strip() else "" for line in lines]


def workload_index(work_dir: Path, shash: str) -> int | None:
    """The line (from 0) of ``database_workload.json`` holding the workload hashed ``shash``.

    Returns:
        The index, or None when the workload is not in the file.
    """
    hashes = workload_hashes(work_dir)
    return hashes.index(shash) if shash and shash in hashes else None


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


def applied_database(work_dir: Path) -> Path | None:
    """The database a build "tuned by ``work_dir``" applies.

    ``<work_dir>/picked`` where the job checked its picks
    (:func:`farm.tuning.verify.verify_picks`); None when it holds no record
    (no pick beat farm's default schedules: the tuned build is the untuned
    one); the work folder itself where no check was written (GPU targets,
    work folders of older farms).
    """
    picked = work_dir / PICKED_DIR
    if not (picked / RECORDS_FILE).is_file():
        return work_dir
    return picked if (picked / RECORDS_FILE).stat().st_size else None


def best_record_s(work_dir: Path, workload_index: int | None = None) -> float:
    """The best measured candidate's mean run time in seconds (inf when none).

    Args:
        work_dir: the tuning work folder.
        workload_index: only this workload's records; all records when None.
    """
    best = float("inf")
    for line in _record_lines(work_dir, workload_index):
        secs = _run_secs(line)
        if _measured(secs):
            best = min(best, float(np.mean(secs)))
    return best


def trial_run_s(work_dir: Path) -> dict[int, list[float | None]]:
    """Each recorded trial's mean run time in seconds, by workload, in the order measured.

    Read while tuning runs (the dashboard's live chart): only complete lines count,
    so a line MetaSchedule is still writing is left for the next read.

    Args:
        work_dir: the tuning work folder; a missing one has no trials.

    Returns:
        workload index (its line in ``database_workload.json``) -> one entry per
        record line of that workload: the mean of its run times, or None where
        the measurement failed (run time at or above :data:`FAILED_RUN_S`).
        Workloads in the order of their first record.
    """
    path = work_dir / RECORDS_FILE
    data = path.read_bytes() if path.is_file() else b""
    times: dict[int, list[float | None]] = {}
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)  # [workload_index, [trace, run_secs, target, args_info]]
            index, secs = int(record[0]), [float(s) for s in record[1][1] or ()]
        except (ValueError, IndexError, TypeError):
            continue  # a torn line that repair_database_file will trim
        times.setdefault(index, []).append(float(np.mean(secs)) if _measured(secs) else None)
    return times
