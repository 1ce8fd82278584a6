"""One figure per result and phone: the spread of that phone's samples, never pooled.

:func:`phone_spreads` groups flat sample rows (:mod:`farm.results.rows`) by job
and serial, keeps each phone's last measurement (a noisy phone's re-run
replaces the first, :func:`~farm.results.rows.latest_repetition`) and computes
its spread with :func:`farm.stats.spread` (median, IQR, CV, bootstrap
95% CI of the median). Samples of two phones never meet in one figure.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from farm.health.readings import result_readings
from farm.results.flat import FlatReadings
from farm.results.rows import SampleRow, latest_repetition
from farm.stats import Spread, spread

__all__ = ["THERMAL_STATUS", "PhoneSpread", "by_workload", "noise_label", "noise_reasons",
           "phone_spreads", "thermal_change"]


@dataclass(frozen=True)
class PhoneSpread(FlatReadings):
    """One phone's figure of one job.

    Attributes:
        job_id, run_id, serial, model, workload, unit: as the rows say.
        spread: of the phone's last measurement, in ``unit``.
        noisy: ``spread.cv`` is above the ``max_cv`` it was judged by.
        rerun: the phone's first measurement was noisy and was re-run once
            (``spread`` is the re-run's).
        finished_at: when the job ended.
        thermal_change: ``(lowest, highest)`` thermal status before its runs
            when they differ (the phone heated or cooled while measuring), else None.
        readings: each reading declared ``with_results``, the worst taken
            before the measurement's runs (the highest; the lowest of one
            whose limit is a minimum), by name; None where none was kept.
    """

    job_id: int
    run_id: str | None
    serial: str | None
    model: str | None
    workload: str
    unit: str
    spread: Spread
    noisy: bool
    rerun: bool
    finished_at: datetime | None
    thermal_change: tuple[int, int] | None = None
    readings: Mapping[str, float | None] = field(default_factory=dict)

    READINGS_AFTER: ClassVar[str] = "rerun"


#: The Android thermal status's name: a change of it between runs flags a figure.
THERMAL_STATUS = "thermal_status"


def _worst(rows: Sequence[SampleRow]) -> dict[str, float | None]:
    """Each result reading's worst value over ``rows``: see :attr:`PhoneSpread.readings`."""
    worst: dict[str, float | None] = {}
    for reading in result_readings():
        known = [v for r in rows if (v := r.readings.get(reading.name)) is not None]
        lowest = reading.limit is not None and reading.limit.bound == "min"
        worst[reading.name] = (min(known) if lowest else max(known)) if known else None
    return worst


def phone_spreads(rows: Iterable[SampleRow], max_cv: float) -> list[PhoneSpread]:
    """The spread of each job's samples per phone, by job id then serial.

    Args:
        rows: flat sample rows, of any jobs and phones.
        max_cv: the CV (a fraction) above which a phone's samples are noisy
            (the config's ``[results] max_cv``).
    """
    rows = list(rows)
    rerun = {(r.job_id, r.serial) for r in rows if r.repetition > 0}
    # An A/B job's builds are two figures of one phone.
    groups: dict[tuple[int, str | None, str], list[SampleRow]] = defaultdict(list)
    for row in latest_repetition(rows):
        groups[(row.job_id, row.serial, row.arm or "")].append(row)
    figures = []
    for (job_id, serial, arm), mine in sorted(groups.items(),
                                              key=lambda g: (g[0][0], g[0][1] or "", g[0][2])):
        first = mine[0]
        # A value no run of this farm writes (NaN, inf: a newer host's row, a hand edit)
        # is left out of the figure rather than failing the whole listing.
        values = [r.value for r in mine if math.isfinite(r.value)]
        if not values:
            continue
        figure = spread(values)
        statuses = [int(v) for r in mine if (v := r.readings.get(THERMAL_STATUS)) is not None]
        figures.append(PhoneSpread(
            job_id=job_id, run_id=first.run_id, serial=serial, model=first.model,
            workload=f"{first.workload} [{arm.upper()}]" if arm else first.workload,
            unit=first.unit, spread=figure,
            noisy=figure.noisy(max_cv), rerun=(job_id, serial) in rerun,
            finished_at=first.finished_at,
            thermal_change=thermal_change(statuses), readings=_worst(mine),
        ))
    return figures


def thermal_change(statuses: Sequence[int]) -> tuple[int, int] | None:
    """``(lowest, highest)`` of the thermal statuses before a measurement's runs, if they differ."""
    if not statuses or min(statuses) == max(statuses):
        return None
    return min(statuses), max(statuses)


def noise_reasons(cv: float, max_cv: float, change: tuple[int, int] | None) -> list[str]:
    """Why one phone's measurement is not to be trusted, one phrase each; empty when steady.

    Args:
        cv: its samples' coefficient of variation (a fraction).
        max_cv: the CV above which samples are noisy (``[results] max_cv``).
        change: :func:`thermal_change` of its runs.
    """
    reasons = [f"CV {cv:.0%} > {max_cv:.0%}"] if cv > max_cv else []
    if change is not None:
        reasons.append(f"thermal status {change[0]}->{change[1]}")
    return reasons


def noise_label(figure: PhoneSpread) -> str:
    """A figure's noise label, e.g. ``noisy: CV 14%, thermal status 0->2`` or ``re-run: steady``.

    A thermal status that changed between the runs marks a figure even when
    its CV is low: the phone's clocks were not the same for all its samples.
    """
    reasons = ([f"CV {figure.spread.cv:.0%}"] if figure.noisy else []) + (
        [f"thermal status {figure.thermal_change[0]}->{figure.thermal_change[1]}"]
        if figure.thermal_change else [])
    label = f"noisy: {', '.join(reasons)}" if reasons else ""
    if figure.rerun:
        return f"re-run: {label}" if label else "re-run: steady"
    return label


def by_workload(figures: Sequence[PhoneSpread], workload: str) -> list[PhoneSpread]:
    """The figures of one workload (its label, e.g. ``gemm n=256 float32``), oldest first."""
    return sorted((f for f in figures if f.workload == workload),
                  key=lambda f: (f.finished_at is None, f.finished_at, f.job_id))
