"""A tuning's work folder seeded with the fleet's best records, and read back for the fleet.

The fleet keeps every measured tuning record by workload, target and device
model (:mod:`farm.queue.tuning`); this module is the work folder's side of it
and knows nothing of the queue. Before a model's tasks are tuned,
:func:`seed_work_dir` appends the fleet's best records of each task's workload
to the work folder's ``database_tuning_record.json``, under that workload's
line, as if this job had measured them. Everything downstream then treats them
as measured trials: they count towards the task's trials (a task whose fleet
records reach its budget measures nothing), :class:`farm.tuning.search.FarmSearch`
never measures their traces again, MetaSchedule's evolutionary search seeds its
population with the best of them (``init_measured_ratio``), and the tuned build
applies the best one. At most the task's trials are seeded, fastest first.
:func:`warm_start` then trains the round's cost model on them before its
first batch.

:func:`read_database` reads a work folder (or an exported database) back as
plain JSON for the fleet to keep.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.errors import SpecError
from farm.jobs.tuning_db import RECORDS_FILE, WORKLOADS_FILE, repair_work_dir
from farm.tuning.search import measured_traces, plain_json, trace_key

__all__ = ["WARM_START_RECORDS", "BestRecords", "WorkDirDatabase", "read_database",
           "seed_work_dir", "target_key", "warm_start", "write_database"]

#: The fleet's best records: ``(target_key, {shash: most wanted})`` ->
#: ``{shash: [record JSON, fastest first]}``, a record JSON being
#: ``[trace, run_secs, target, args_info]``. Bound to one device model by its maker.
BestRecords = Callable[[str, Mapping[str, int]], Mapping[str, Sequence[Sequence[Any]]]]


def target_key(target_json: Any) -> str:
    """A target's identity as the records hold it: canonical JSON of its export.

    Args:
        target_json: a record's target (the file's JSON) or ``Target(...).export()``
            (a TVM ``Map``): both give the same key.
    """
    return json.dumps(plain_json(target_json), sort_keys=True)


@dataclass(frozen=True)
class WorkDirDatabase:
    """A MetaSchedule JSON database folder, read as plain JSON.

    Attributes:
        workloads: each line of ``database_workload.json``: ``(shash, module)``.
        records: each line of ``database_tuning_record.json``:
            ``(workload_index, [trace, run_secs, target, args_info])``.
    """

    workloads: list[tuple[str, str]]
    records: list[tuple[int, list[Any]]]


def _lines(path: Path) -> list[Any]:
    """The JSON lines of ``path``.

    Raises:
        SpecError: a line is not JSON (named by file and line).
    """
    rows = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise SpecError(str(path), f"line {number} is not JSON ({exc})") from exc
    return rows


def read_database(folder: Path) -> WorkDirDatabase:
    """Read a MetaSchedule JSON database folder (a work folder or an export).

    Args:
        folder: holds ``database_workload.json`` and ``database_tuning_record.json``
            (a missing file is empty).

    Returns:
        Its workloads and records, checked for shape.

    Raises:
        SpecError: a line is not JSON or not MetaSchedule's shape, or a record
            names a workload line the workloads file lacks (named by file and line).
    """
    workloads_path, records_path = folder / WORKLOADS_FILE, folder / RECORDS_FILE
    workloads: list[tuple[str, str]] = []
    if workloads_path.is_file():
        for number, row in enumerate(_lines(workloads_path), start=1):
            if not (isinstance(row, list) and len(row) == 2 and all(isinstance(x, str)
                                                                   for x in row)):
                raise SpecError(str(workloads_path),
                                f"line {number} is not a workload [shash, module]")
            workloads.append((row[0], row[1]))
    records: list[tuple[int, list[Any]]] = []
    if records_path.is_file():
        for number, row in enumerate(_lines(records_path), start=1):
            if not (isinstance(row, list) and len(row) == 2 and isinstance(row[0], int)
                    and isinstance(row[1], list) and len(row[1]) >= 3):
                raise SpecError(str(records_path), f"line {number} is not a tuning record "
                                "[workload_index, [trace, run_secs, target, ...]]")
            if not 0 <= row[0] < len(workloads):
                raise SpecError(str(records_path), f"line {number} names workload {row[0]}, "
                                f"but {workloads_path.name} has {len(workloads)}")
            records.append((row[0], row[1]))
    return WorkDirDatabase(workloads, records)


def write_database(folder: Path, workloads: Mapping[str, str],
                   records: Sequence[tuple[str, Sequence[Any]]]) -> None:
    """Write a MetaSchedule JSON database folder (``JSONDatabase(work_dir=folder)`` loads it).

    Args:
        folder: created if missing; its two files are replaced.
        workloads: each workload module (base64 JSON) by shash, in the order to write.
        records: ``(shash, [trace, run_secs, target, args_info])`` each, its
            workload among ``workloads``.

    Raises:
        OSError: the folder cannot be written.
    """
    order = {shash: index for index, shash in enumerate(workloads)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / WORKLOADS_FILE).write_text(
        "".join(json.dumps([s, m]) + "\n" for s, m in workloads.items()), encoding="utf-8")
    (folder / RECORDS_FILE).write_text(
        "".join(json.dumps([order[s], list(r)]) + "\n" for s, r in records), encoding="utf-8")


def seed_work_dir(work_dir: Path, seeds: Mapping[int, Sequence[Sequence[Any]]],
                  wanted: Mapping[int, int]) -> int:
    """Append fleet records to a work folder, under their workload's line.

    A record whose trace the work folder has measured for that workload is
    skipped (a retried attempt seeds again and adds nothing).

    Args:
        work_dir: the tuning work folder; its workloads are committed already.
        seeds: record JSONs by workload index, fastest first.
        wanted: how many to add at most, by workload index.

    Returns:
        Records added.
    """
    repair_work_dir(work_dir)
    measured = measured_traces(work_dir)
    lines = []
    for index, records in seeds.items():
        have = measured.get(index, set())
        fresh = [r for r in records if trace_key(r[0]) not in have]
        fresh = fresh[: max(0, wanted.get(index, 0))]
        lines += [json.dumps([index, list(r)]) + "\n" for r in fresh]
    if lines:
        with (work_dir / RECORDS_FILE).open("a", encoding="utf-8") as out:
            out.writelines(lines)
    return len(lines)


#: Each task's best records the cost model is trained on before its first batch.
WARM_START_RECORDS = 256


def warm_start(model: Any, contexts: Sequence[Any], work_dir: Path,
               per_task: int = WARM_START_RECORDS) -> int:
    """Train ``model`` on the work folder's records of each task before the first batch.

    MetaSchedule's task scheduler trains its cost model only on the batches it
    measures itself, and until the model holds ``num_warmup_samples`` results
    it scores candidates at random (``XGBModel.predict``, apache/tvm
    ``python/tvm/s_tir/meta_schedule/cost_model/xgb_model.py``): a job seeded
    with the fleet's records of the same device model (:func:`seed_work_dir`),
    or resumed, would search its first batches blind. Each task's best
    ``per_task`` measured records are given to ``model.update`` first, as
    if measured in this round.

    Args:
        model: MetaSchedule's cost model; a string (``"random"``) is left alone.
        contexts: each task's ``TuneContext``.
        work_dir: the work folder whose records are read.
        per_task: records per task at most, fastest first.

    Returns:
        The records the model was trained on (0: none, or no trainable model).
    """
    if isinstance(model, str) or not (work_dir / RECORDS_FILE).is_file():
        return 0
    from tvm.s_tir import meta_schedule as ms

    from farm.jobs.tuning_db import FAILED_RUN_S

    database = ms.database.JSONDatabase(work_dir=str(work_dir))
    fed = 0
    for context in contexts:
        if not database.has_workload(context.mod):
            continue
        records = [r for r in database.get_top_k(database.commit_workload(context.mod), per_task)
                   if r.run_secs and all(float(s) < FAILED_RUN_S for s in r.run_secs)]
        if records:
            model.update(context, [r.as_measure_candidate() for r in records],
                         [ms.runner.RunnerResult(r.run_secs, None) for r in records])
            fed += len(records)
    return fed
