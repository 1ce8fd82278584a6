"""A tuning job's counters, kept in its work folder so they add up across attempts.

A job's attempts share one work folder (:func:`farm.runner.execute.tune_work_dir`)
and MetaSchedule's database in it; the counters live beside it::

    <work_dir>/farm_progress.json
        {"attempts": 2, "rounds": 3, "batches": 5, "app_relaunches": ["serial", ...]}

Each change is written at once (``farm.privacy.write_private``: atomic, 0600), so a
farmd or child killed with -9 loses at most the change it was making; the file
is private (0600) like the rest of the data folder. The monitor thread of
:mod:`farm.runner.tune_phones` and the tuning thread both update it, so every
update holds one lock.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import structlog

from farm.privacy import write_private

__all__ = ["PROGRESS_FILE", "TuneCounters", "TuneProgress"]

log = structlog.get_logger(__name__)

PROGRESS_FILE = "farm_progress.json"


@dataclass(frozen=True)
class TuneCounters:
    """What a tuning job did so far, over all its attempts.

    Attributes:
        attempts: tuning runs started on the work folder (one per job attempt).
        rounds: MetaSchedule ``tune_tir`` runs; one round measures one or more batches.
        batches: measured batches (MetaSchedule iterations of up to
            ``trials_per_batch`` candidates each).
        app_relaunches: the serial of each phone relaunched after its app crashed,
            in order.
    """

    attempts: int = 0
    rounds: int = 0
    batches: int = 0
    app_relaunches: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``app_relaunches`` as a list."""
        record = asdict(self)
        record["app_relaunches"] = list(self.app_relaunches)
        return record

    @classmethod
    def from_dict(cls, record: Any) -> TuneCounters:
        """Counters from their JSON form; anything malformed counts as zero.

        Args:
            record: a parsed ``farm_progress.json``.
        """
        if not isinstance(record, dict):
            return cls()

        def count(name: str) -> int:
            value = record.get(name)
            return value if type(value) is int and value >= 0 else 0

        relaunches = record.get("app_relaunches")
        serials = tuple(s for s in relaunches if isinstance(s, str)) if isinstance(
            relaunches, list) else ()
        return cls(count("attempts"), count("rounds"), count("batches"), serials)


class TuneProgress:
    """The counters of one work folder, persisted on every change (thread-safe).

    Args:
        work_dir: the tuning work folder (created if missing).
    """

    def __init__(self, work_dir: Path) -> None:
        self.path = Path(work_dir) / PROGRESS_FILE
        self._lock = threading.Lock()
        self._counters = self._load()

    @property
    def counters(self) -> TuneCounters:
        """The counters now."""
        with self._lock:
            return self._counters

    def add(self, *, attempts: int = 0, rounds: int = 0, batches: int = 0) -> TuneCounters:
        """Add to the counters and persist them; return the new counters."""
        with self._lock:
            c = self._counters
            return self._store(replace(c, attempts=c.attempts + attempts, rounds=c.rounds + rounds,
                                       batches=c.batches + batches))

    def add_relaunch(self, serial: str) -> None:
        """Record that ``serial``'s app was relaunched."""
        with self._lock:
            c = self._counters
            self._store(replace(c, app_relaunches=(*c.app_relaunches, serial)))

    def _store(self, counters: TuneCounters) -> TuneCounters:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_private(self.path, json.dumps(counters.to_dict()))
        self._counters = counters
        return counters

    def _load(self) -> TuneCounters:
        try:
            return TuneCounters.from_dict(json.loads(self.path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return TuneCounters()
        except (OSError, ValueError) as exc:
            # A torn or foreign file must not fail the job: the trials themselves
            # are in MetaSchedule's database, only these counters restart.
            log.warning("tuning_progress_unreadable", path=str(self.path), reason=str(exc))
            return TuneCounters()
