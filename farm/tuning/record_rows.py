"""A fleet tuning record's identity and values, and the store's protocol for keeping them.

Its own light module (no structlog, numpy or TVM) because the queue's store imports
it (:mod:`farm.queue.tuning`), and farmctl opens the store for its listings and
``wait`` without loading any of those. :mod:`farm.tuning.fleet_records` uses it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

__all__ = ["FleetRecord", "RecordStore", "record_key"]


def record_key(shash: str, target: str, device_model: str, trace: str) -> str:
    """A record's identity: hex SHA-256 of its workload, target, device model and trace key.

    Args:
        shash: the workload's structural hash.
        target: the target's canonical JSON.
        device_model: the device model it was measured on.
        trace: the trace's key (:func:`farm.tuning.search.trace_key`).
    """
    text = json.dumps([shash, target, device_model, trace])
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class FleetRecord:
    """One tuning record as the fleet keeps it.

    Attributes:
        shash: its workload's structural hash.
        target: the target's canonical JSON.
        device_model: the phone model (or SoC) it was measured on.
        record: MetaSchedule's record JSON ``[trace, run_secs, target, args_info]``.
        run_s: the mean of its run times in seconds; None: the measurement failed.
        key: :func:`record_key`.
        label: what it tuned, e.g. ``"tune model m.onnx fused_conv2d_add_relu"``.
        workload_index: its workload's line in the work folder it came from.
    """

    shash: str
    target: str
    device_model: str
    record: list[Any]
    run_s: float | None
    key: str
    label: str = ""
    workload_index: int = 0


class RecordStore(Protocol):
    """The fleet records' operations a tuning uses (:class:`farm.queue.tuning.TuningRecordOps`)."""

    def keep_tuning_records(
        self, workloads: Mapping[str, str], records: Sequence[FleetRecord],
        job_id: int | None, attempt_id: int | None, now: datetime,
    ) -> int:
        """Keep ``records`` not kept yet (by key); returns how many were new.

        Raises:
            StoreError: the database refused the write.
        """
        ...

    def best_tuning_records(
        self, limits: Mapping[str, int], target: str, device_model: str
    ) -> dict[str, list[list[Any]]]:
        """The best measured records of each workload (at most ``limits[shash]``).

        Raises:
            StoreError: the database cannot be read.
        """
        ...
