"""A tuning's link to the fleet's tuning records: each record's identity, and where they are kept.

The work folder side is :mod:`farm.tuning.seed`, the database side
:mod:`farm.queue.tuning`, reached through :class:`RecordStore` (the queue's
``Store`` is one; the tune kind hands it in, :mod:`farm.kinds.tune_model`):
:func:`best_records` serves the fleet's best of one device model to
:func:`farm.tuning.model.tune_model`, and :func:`keep_work_dir` stores every
record of the work folder when the attempt ends, succeeded or not (a record
kept already, seeded from the fleet or stored by an earlier attempt, is not
stored again). ``farmctl records import`` keeps an exported database the same
way (:func:`fleet_records`).

:class:`RecordCheckpoint` keeps the records as they are measured, after every
batch: a farmd killed with -9 mid-task runs no ``finally``, and its host's
work folder may be gone with the host, but the records it measured are in the
database already, so the job's retry on any host starts from them
(:func:`best_records`) and measures none of them again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from farm.tuning.record_rows import FleetRecord, RecordStore, record_key

if TYPE_CHECKING:
    from farm.tuning.seed import BestRecords, WorkDirDatabase

__all__ = ["FleetRecord", "RecordCheckpoint", "RecordStore", "best_records", "fleet_records",
           "keep_work_dir", "record_key"]

log = structlog.get_logger(__name__)


def best_records(store: RecordStore, device_model: str) -> BestRecords:
    """The fleet's best records of ``device_model``, served as ``tune_model`` asks for them."""

    def best(target: str, limits: Mapping[str, int]) -> Mapping[str, Sequence[Sequence[Any]]]:
        return store.best_tuning_records(limits, target, device_model)

    return best


def fleet_records(database: WorkDirDatabase, device_model: str,
                  label: Callable[[int], str] = lambda _index: "") -> list[FleetRecord]:
    """Each record of a database folder as the fleet keeps it.

    Args:
        database: the folder's workloads and records (:func:`farm.tuning.seed.read_database`).
        device_model: the device model they were measured on.
        label: a workload index -> what it tuned.
    """
    import numpy as np

    from farm.jobs.tuning_db import FAILED_RUN_S
    from farm.tuning.search import trace_key
    from farm.tuning.seed import target_key

    kept = []
    for index, record in database.records:
        shash = database.workloads[index][0]
        target = target_key(record[2])
        secs = [float(s) for s in record[1] or ()]
        run_s = float(np.mean(secs)) if secs and all(s < FAILED_RUN_S for s in secs) else None
        kept.append(FleetRecord(shash, target, device_model, list(record), run_s,
                                record_key(shash, target, device_model, trace_key(record[0])),
                                label(index), index))
    return kept


def keep_work_dir(store: RecordStore, work_dir: Path, device_model: str,
                  job_id: int | None, attempt_id: int | None, label: Callable[[int], str],
                  now: datetime) -> int:
    """Store every record of a work folder not stored yet; return how many were new.

    Called when an attempt ends, also by one that failed: a store that refuses
    the write, or a work folder that cannot be read, is logged, not raised
    (it would hide the attempt's own error); the records stay in the work
    folder, and the job's next attempt keeps them.
    """
    from farm.jobs.tuning_db import repair_work_dir

    try:
        repair_work_dir(work_dir)
    except OSError as exc:
        log.warning("tuning_records_not_kept", work_dir=str(work_dir), reason=str(exc))
        return 0
    done = _keep_lines(store, work_dir, device_model, job_id, attempt_id, label, now, 0)
    if done is None:
        return 0
    log.info("tuning_records_kept", records=done[0], device_model=device_model)
    return done[0]


def _keep_lines(store: RecordStore, work_dir: Path, device_model: str,
                job_id: int | None, attempt_id: int | None, label: Callable[[int], str],
                now: datetime, first_line: int) -> tuple[int, int] | None:
    """Store the work folder's record lines from ``first_line`` on; a kept one is skipped.

    Returns:
        ``(records new to the store, record lines in the work folder)``; None
        when the folder cannot be read or the store refuses the write (logged).
    """
    from farm.errors import SpecError, StoreError
    from farm.tuning.seed import read_database

    try:
        database = read_database(work_dir)
        new = replace(database, records=database.records[first_line:])
        kept = store.keep_tuning_records(dict(database.workloads),
                                         fleet_records(new, device_model, label),
                                         job_id, attempt_id, now)
    except (SpecError, StoreError, OSError) as exc:
        log.warning("tuning_records_not_kept", work_dir=str(work_dir), reason=str(exc))
        return None
    return kept, len(database.records)


class RecordCheckpoint:
    """Keeps the records a work folder gained since the last call in the fleet's records.

    A :data:`farm.tuning.model.Checkpoint`: ``tune_model`` calls it after
    every measured batch. MetaSchedule only appends record lines, so the lines
    past those kept already are the new ones; a seeded record is among them
    and skipped by its key. A store that refuses the write is logged and the
    lines are tried again at the next batch (and by :func:`keep_work_dir` at
    the attempt's end): a checkpoint never stops the tuning.

    Args:
        store, work_dir, device_model, job_id, attempt_id: as :func:`keep_work_dir`'s.
        stem: each record's label begins with it, e.g. ``"tune model m.onnx"``.
    """

    def __init__(self, store: RecordStore, work_dir: Path, device_model: str,
                 job_id: int | None, attempt_id: int | None, stem: str) -> None:
        self.store, self.work_dir, self.device_model = store, work_dir, device_model
        self.job_id, self.attempt_id, self.stem = job_id, attempt_id, stem
        #: Record lines of the work folder kept so far (or found kept).
        self.lines_kept = 0

    def __call__(self, names: Mapping[int, str]) -> None:
        """Keep the new record lines, each labelled ``"<stem> <task name>"``.

        Args:
            names: each task's name by its workload index.
        """
        from farm.clock import SystemClock

        done = _keep_lines(self.store, self.work_dir, self.device_model, self.job_id,
                           self.attempt_id,
                           lambda i: f"{self.stem} {names[i]}" if i in names else self.stem,
                           SystemClock().now(), self.lines_kept)
        if done is None:
            return  # tried again at the next batch, and by keep_work_dir at the end
        kept, self.lines_kept = done
        log.info("tuning_checkpoint_kept", records=kept, lines=self.lines_kept)
