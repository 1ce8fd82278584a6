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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from farm.results.rows import SampleRow, latest_repetition
from farm.stats import Spread, spread

__all__ = ["PhoneSpread", "by_workload", "noise_label", "noise_reasons", "phone_spreads",
           "thermal_change"]


@dataclass(frozen=True)
class PhoneSpread:
    """One phone's figure of one job.

    Attributes:
        job_id, run_id, serial, model, workload, unit: as the rows say.
        spread: of the phone's last measurement, in ``unit``.
        noisy: ``spread.cv`` is above the ``max_cv`` it was judged by.
        rerun: the phone's first measurement was noisy and was re-run once
            (``spread`` is the re-run's).
        battery_temp_c: the hottest battery temperature taken before the
            measurement's runs, °C; None if no snapshot was kept.
        thermal_status: the highest Android thermal status before its runs.
        thermal_change: ``(lowest, highest)`` thermal status before its runs
            when they differ (the phone heated or cooled while measuring), else None.
        finished_at: when the job ended.
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
    battery_temp_c: float | None
    thermal_status: int | None
    finished_at: datetime | None
    thermal_change: tuple[int, int] | None = None


def _highest(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


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
        statuses = [r.thermal_status for r in mine if r.thermal_status is not None]
        figures.append(PhoneSpread(
            job_id=job_id, run_id=first.run_id, serial=serial, model=first.model,
            workload=f"{first.workload} [{arm.upper()}]" if arm else first.workload,
            unit=first.unit, spread=figure,
            noisy=figure.noisy(max_cv), rerun=(job_id, serial) in rerun,
            battery_temp_c=_highest(r.battery_temp_c for r in mine),
            thermal_status=max(statuses, default=None),
            finished_at=first.finished_at,
            thermal_change=thermal_change(statuses),
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
