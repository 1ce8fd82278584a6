"""The health samples of :class:`farm.queue.store.Store`: one row per probe, read and thinned.

Written by the fleet's health sweep (:meth:`HealthSampleOps.record_health`),
read by ``farmctl devices --health`` and the dashboard, thinned by retention
(:meth:`HealthSampleOps.downsample_health`). A device's state and health are
:mod:`farm.queue.devices`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select

from farm.queue.models import LEGACY_READINGS, HealthSample, readings_of
from farm.queue.ops import TransactionOps
from farm.queue.thinning import health_ids_to_drop

__all__ = ["HealthSampleOps"]

_DELETE_BATCH = 500  # ids per DELETE ... IN (...): under SQLite's bound-parameter limit

#: The status columns of a sample (not readings: no kind declares them).
_STATUS_COLUMNS = ("screen_on", "app_running", "registered")


class HealthSampleOps(TransactionOps):
    """Health sample operations; mixed into Store, which provides ``_tx()``."""

    def record_health(self, serial: str, at: datetime, values: Mapping[str, Any],
                      readings: Mapping[str, float | None] | None = None) -> None:
        """Store one health probe.

        Args:
            serial: the device probed.
            at: when.
            values: any of ``screen_on``, ``app_running``, ``registered`` (the
                device's status), and readings of a phone by name
                (``battery_pct``, ...); missing ones are stored as NULL.
            readings: the readings the device's kind declares, by name (any
                name: the store keeps what the kind declares); None values are
                not stored.

        Raises:
            ValueError: a key of ``values`` is neither a status nor a phone's
                reading (a bug in the caller).
        """
        unknown = set(values) - set(_STATUS_COLUMNS) - set(LEGACY_READINGS)
        if unknown:
            raise ValueError(f"unknown health sample fields: {sorted(unknown)}")
        merged = {**{k: v for k, v in values.items() if k in LEGACY_READINGS}, **(readings or {})}
        stored = {name: value for name, value in merged.items() if value is not None}
        columns = {k: v for k, v in values.items() if k in _STATUS_COLUMNS}
        columns.update({name: stored[name] for name in LEGACY_READINGS if name in stored})
        with self._tx() as session:
            session.add(HealthSample(serial=serial, at=at, readings=stored, **columns))

    def downsample_health(self, before: datetime, bucket_s: float) -> int:
        """Thin health samples older than ``before`` to one per phone per ``bucket_s``.

        The latest sample of each bucket is kept (:func:`farm.queue.thinning.health_ids_to_drop`).

        Returns:
            How many samples were deleted.
        """
        query = (
            select(HealthSample.id, HealthSample.serial, HealthSample.at)
            .where(HealthSample.at < before)
            .order_by(HealthSample.serial, HealthSample.at, HealthSample.id)
            .execution_options(yield_per=_DELETE_BATCH * 10)
        )
        with self._tx() as session:
            rows = ((row.id, row.serial, row.at) for row in session.execute(query))
            drop = list(health_ids_to_drop(rows, bucket_s))
            for start in range(0, len(drop), _DELETE_BATCH):
                batch = drop[start:start + _DELETE_BATCH]
                session.execute(delete(HealthSample).where(HealthSample.id.in_(batch)))
        return len(drop)

    def health_samples(self, serial: str, limit: int = 100) -> list[dict[str, Any]]:
        """A device's latest health probes, newest first.

        Returns:
            One dict per sample: ``at``, the status columns, ``readings``
            (``{name: value}``) and each reading again under its own name.
        """
        query = (
            select(HealthSample)
            .where(HealthSample.serial == serial)
            .order_by(HealthSample.at.desc(), HealthSample.id.desc())
            .limit(limit)
        )
        with self._tx() as session:
            rows = []
            for sample in session.scalars(query):
                readings = readings_of(sample)
                rows.append({"at": sample.at, **{c: getattr(sample, c) for c in _STATUS_COLUMNS},
                             **readings, "readings": readings})
            return rows
