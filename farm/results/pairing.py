"""Which device snapshot belongs to which measured run: the one pairing rule of results.

A job's stored result keeps its runs (``summary["runs"]``: serial, mean
seconds...) and raw samples apart from the device states thermal gating took
before each measured run (:class:`farm.queue.records.SnapshotData`). Results
rows (:mod:`farm.results.rows`) and the report (:mod:`farm.results.report`)
both pair them here, so each figure says how warm its device was at that moment.

The rule: within the attempt that produced the result (snapshots of failed
earlier attempts are ignored), a device's measured runs are its last
snapshots, one each (``farm.kinds.measure`` gates, then runs; a tune job also
gates before tuning, which measures nothing kept), as many as the summary's
``runs`` of that device, in order. A run's samples share its snapshot; an A/B
round's samples take the reading taken last before the round.

What a snapshot says beside a figure is the readings the kinds declare
``with_results`` (:func:`farm.health.readings.result_readings`).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from farm.health.readings import Reading, result_readings
from farm.queue.records import ResultView, SnapshotData

__all__ = ["MeasuredSnapshots", "plotted_reading", "readings_at", "result_columns"]


class MeasuredSnapshots:
    """The snapshots that gated one result's measured runs, per device.

    Args:
        result: the result; its ``attempt_id`` picks the snapshots and its
            summary's ``runs`` how many each device's runs took.
        snapshots: the job's snapshots, oldest first (``Store.snapshots``).
    """

    def __init__(self, result: ResultView, snapshots: Sequence[SnapshotData]) -> None:
        taken: dict[str | None, list[SnapshotData]] = defaultdict(list)
        for snapshot in snapshots:
            if snapshot.attempt_id in (None, result.attempt_id):
                taken[snapshot.serial].append(snapshot)
        runs: dict[str | None, int] = defaultdict(int)
        for run in result.summary.get("runs") or ():
            runs[run.get("serial")] += 1
        for serial, mine in taken.items():
            if 0 < runs[serial] < len(mine):
                taken[serial] = mine[-runs[serial]:]  # earlier ones gated unmeasured work
        self._taken = dict(taken)
        self._summary = result.summary

    def of(self, serial: str | None) -> list[SnapshotData]:
        """The device's measured runs' snapshots, oldest first; empty where none was kept."""
        return list(self._taken.get(serial, ()))

    def of_run(self, serial: str | None, index: int) -> SnapshotData | None:
        """The snapshot before the device's ``index``-th run (from 0, re-runs counted)."""
        mine = self._taken.get(serial, [])
        return mine[index] if index < len(mine) else None

    def of_sample(self, serial: str | None, index: int, count: int,
                  round_: int | None = None) -> SnapshotData | None:
        """The snapshot before the run that took the device's ``index``-th of ``count`` samples.

        Every run of a job yields the same number of samples, so a device's
        samples split evenly over its runs' snapshots in order; an A/B
        round's (``round_``) take the reading taken last before that round
        (the summary's ``readings_at_rounds``).
        """
        mine = self._taken.get(serial, [])
        if round_ is not None:
            return _reading_before(mine, self._summary, serial, round_)
        return mine[index * len(mine) // count] if mine else None


def readings_at(snapshot: SnapshotData | None) -> dict[str, float | None]:
    """The readings kept with results (``with_results``) that ``snapshot`` took, by name.

    None for each where the snapshot is None or did not read it. A snapshot
    keeps a reading under ``battery`` or ``thermal`` (:func:`farm.runner.gating.snapshot_of`);
    both are read.
    """
    kept: Mapping[str, Any] = {} if snapshot is None else {**snapshot.thermal, **snapshot.battery}
    return {r.name: _number(kept.get(r.name)) for r in result_readings()}


def result_columns() -> list[dict[str, Any]]:
    """The readings kept with results as the dashboard heads its columns with them.

    Returns:
        ``[{"name", "heading", "unit", "levels"}]`` in declaration order:
        ``heading`` is the label with its unit (``battery temp °C``), ``levels``
        the names of a level's values (a thermal status), else empty.
    """
    return [{"name": r.name, "heading": r.heading, "unit": r.unit, "levels": list(r.levels)}
            for r in result_readings()]


def plotted_reading() -> Reading | None:
    """The reading plots draw beside each figure: the first quantity kept with results.

    A level (a thermal status) reads badly as a bar, so the first
    ``with_results`` reading without ``levels``: a phone's battery
    temperature. None where no kind declares one.
    """
    return next((r for r in result_readings() if not r.levels), None)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _reading_before(snapshots: Sequence[SnapshotData], summary: Mapping[str, Any],
                    serial: str | None, round_: int) -> SnapshotData | None:
    """The device's last reading taken before A/B round ``round_`` (``readings_at_rounds``)."""
    per_serial = summary.get("per_serial")
    figures = per_serial.get(serial or "") if isinstance(per_serial, Mapping) else None
    at = figures.get("readings_at_rounds") if isinstance(figures, Mapping) else None
    if not snapshots or not isinstance(at, list) or len(at) != len(snapshots):
        return snapshots[0] if snapshots else None
    taken = bisect.bisect_right(at, round_) - 1
    return snapshots[max(taken, 0)]
