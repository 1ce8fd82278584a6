"""The fleet's tuning records: the tuning half of :class:`farm.queue.store.Store`.

Every record a tuning measured is kept by its workload (MetaSchedule's
structural hash), its target and the device model it was measured on, with
the job it came from (none for an imported one). Two tables mirror
MetaSchedule's JSON database (``database_workload.json``,
``database_tuning_record.json``): ``tuning_workloads`` holds each workload once,
``tuning_records`` each record ``[trace, run_secs, target, args_info]``.

A record is kept once per ``record_key`` (:func:`record_key`: workload, target,
device model and trace), whoever stores it again: a later job whose work folder
was seeded with it, a second import of the same file, a retried attempt
(``INSERT ... ON CONFLICT DO NOTHING`` on PostgreSQL and SQLite, so two hosts
storing at once both succeed). ``target`` is the target as the records hold it
(``Target.export()``), as canonical JSON (:func:`farm.jobs.tuning_db.target_key`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from farm.queue.models import TuningRecord, TuningWorkload
from farm.queue.ops import TransactionOps
from farm.tuning.record_rows import FleetRecord, record_key

# A record's value and identity are the tuning engine's (it keeps records through its
# RecordStore protocol, which this mixin provides); re-exported for the queue's users.
__all__ = ["FleetRecord", "FleetRecordSummary", "TuningRecordOps", "record_key"]

#: Records written per statement: 11 values a row stays under SQLite's 32766
#: bound parameters (``SQLITE_MAX_VARIABLE_NUMBER`` since 3.32).
_CHUNK = 1000


@dataclass(frozen=True)
class FleetRecordSummary:
    """The fleet's records of one workload on one target and device model.

    Attributes:
        shash: the workload's structural hash.
        label: what tuned it (the latest record's label).
        target: the target's canonical JSON.
        device_model: the device model.
        best_s: the best record's mean run time in seconds (None: none measured).
        trials: measured records; failed: records whose measurement failed.
    """

    shash: str
    label: str
    target: str
    device_model: str
    best_s: float | None
    trials: int
    failed: int


def _insert(session: Session) -> Any:
    """The dialect's ``insert`` (it has ``on_conflict_do_nothing``)."""
    return (postgresql if session.get_bind().dialect.name == "postgresql" else sqlite).insert


class TuningRecordOps(TransactionOps):
    """Fleet tuning record operations; mixed into Store, which provides ``_tx()``."""

    def keep_tuning_records(
        self, workloads: Mapping[str, str], records: Sequence[FleetRecord],
        job_id: int | None, attempt_id: int | None, now: datetime,
    ) -> int:
        """Store records not stored yet, and their workloads; idempotent and safe to race.

        Args:
            workloads: each record's workload module (base64 JSON) by shash.
            records: the records; one whose key is stored already is skipped.
            job_id: the job that measured them; None for imported records.
            attempt_id: its attempt; None for imported records.
            now: the time stored.

        Returns:
            Records newly stored.

        Raises:
            KeyError: a record's workload is not in ``workloads``.
            StoreError: the database refused the write.
        """
        if not records:
            return 0
        with self._tx() as session:
            insert = _insert(session)
            needed = {r.shash for r in records}
            session.execute(insert(TuningWorkload).values([
                {"shash": s, "module": workloads[s], "created_at": now} for s in sorted(needed)
            ]).on_conflict_do_nothing(index_elements=[TuningWorkload.shash]))
            ids = dict(session.execute(select(TuningWorkload.shash, TuningWorkload.id)
                                       .where(TuningWorkload.shash.in_(needed))).all())
            seen: set[str] = set()
            added = 0
            for start in range(0, len(records), _CHUNK):
                chunk = records[start:start + _CHUNK]
                seen |= set(session.scalars(select(TuningRecord.record_key).where(
                    TuningRecord.record_key.in_([r.key for r in chunk]))))
                rows = []
                for r in chunk:
                    if r.key in seen:
                        continue
                    seen.add(r.key)
                    rows.append({
                        "job_id": job_id, "attempt_id": attempt_id, "workload": r.label,
                        "target": r.target, "created_at": now, "workload_id": ids[r.shash],
                        "device_model": r.device_model, "run_s": r.run_s, "record_key": r.key,
                        "record": {"workload_index": r.workload_index, "record": r.record},
                    })
                if rows:  # a racing host may have stored some since: those are skipped
                    done = session.execute(insert(TuningRecord).values(rows)
                                           .on_conflict_do_nothing(
                                               index_elements=[TuningRecord.record_key]))
                    count = getattr(done, "rowcount", -1)
                    added += count if count >= 0 else len(rows)
        return added

    def best_tuning_records(
        self, limits: Mapping[str, int], target: str, device_model: str
    ) -> dict[str, list[list[Any]]]:
        """The fleet's best measured records of each workload, on one target and device model.

        Args:
            limits: how many records to give at most, by workload shash.
            target: the target's canonical JSON.
            device_model: the device model.

        Returns:
            By shash (workloads with none are left out): record JSONs
            ``[trace, run_secs, target, args_info]``, fastest first.

        Raises:
            StoreError: the database cannot be read.
        """
        best: dict[str, list[list[Any]]] = {}
        with self._tx() as session:
            for shash, limit in limits.items():
                if limit <= 0:
                    continue
                query = (select(TuningRecord.record).join(TuningWorkload)
                         .where(TuningWorkload.shash == shash, TuningRecord.target == target,
                                TuningRecord.device_model == device_model,
                                TuningRecord.run_s.is_not(None))
                         .order_by(TuningRecord.run_s, TuningRecord.id).limit(limit))
                found = [list(r["record"]) for r in session.scalars(query)]
                if found:
                    best[shash] = found
        return best

    def tuning_record_summaries(self, device_model: str | None = None) -> list[FleetRecordSummary]:
        """One summary per workload, target and device model, ``device_model``'s only if given.

        Raises:
            StoreError: the database cannot be read.
        """
        measured = func.count(TuningRecord.run_s)
        query = (select(TuningWorkload.shash, func.max(TuningRecord.workload), TuningRecord.target,
                        TuningRecord.device_model, func.min(TuningRecord.run_s), measured,
                        func.count(TuningRecord.id) - measured)
                 .join(TuningWorkload)
                 .group_by(TuningWorkload.shash, TuningRecord.target, TuningRecord.device_model)
                 .order_by(TuningRecord.device_model, TuningWorkload.shash, TuningRecord.target))
        if device_model is not None:
            query = query.where(TuningRecord.device_model == device_model)
        with self._tx() as session:
            return [FleetRecordSummary(str(s), str(label or ""), str(t), str(m or ""),
                                       None if best is None else float(best), int(n), int(f))
                    for s, label, t, m, best, n, f in session.execute(query)]

    def fleet_database(
        self, device_model: str | None = None
    ) -> tuple[dict[str, str], list[tuple[str, list[Any]]]]:
        """The fleet's measured records as a MetaSchedule database holds them.

        Args:
            device_model: only this device model's; all when None.

        Returns:
            ``(workloads, records)``: each workload module by shash, and each
            measured record's ``(shash, record JSON)``, in the order stored.

        Raises:
            StoreError: the database cannot be read.
        """
        query = (select(TuningWorkload.shash, TuningRecord.record).join(TuningWorkload)
                 .where(TuningRecord.run_s.is_not(None)).order_by(TuningRecord.id))
        if device_model is not None:
            query = query.where(TuningRecord.device_model == device_model)
        with self._tx() as session:
            records = [(str(s), list(r["record"])) for s, r in session.execute(query)]
            shashes = {s for s, _ in records}
            workloads = dict(session.execute(
                select(TuningWorkload.shash, TuningWorkload.module)
                .where(TuningWorkload.shash.in_(shashes))).all())
        return workloads, records
