"""PNG plots of per-phone figures (``farmctl results --plot``, ``--history``).

Drawn with matplotlib's object API on the Agg canvas (no pyplot global state,
no display), as :mod:`farm.results.report` does, so they work in farmd, tests and CI.
Timings (unit ``s``) are drawn in milliseconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from farm.results.pairing import plotted_reading
from farm.results.spreads import PhoneSpread

__all__ = ["write_history_plot", "write_spread_plot"]

_DPI = 100


def _scale(unit: str) -> tuple[float, str]:
    """Factor and label to draw values of ``unit``: seconds as ms."""
    return (1e3, "ms") if unit == "s" else (1.0, unit)


def _figure(width_in: float, columns: int) -> tuple[Any, Any]:
    """A figure on the Agg canvas and its ``columns`` axes, side by side."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_in, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    ratios = [3, 1] if columns == 2 else None
    return figure, figure.subplots(1, columns, width_ratios=ratios)


def _save(figure: Any, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=_DPI)
    return path


def _label(figure: PhoneSpread, several_jobs: bool) -> str:
    serial = figure.serial or "-"
    return f"{serial}\njob {figure.job_id}" if several_jobs else serial


def write_spread_plot(figures: Sequence[PhoneSpread], path: Path,
                      title: str = "farm results per phone") -> Path:
    """Per phone, its median with the 95% CI as error bars; a reading before its runs beside it.

    The reading is :func:`~farm.results.pairing.plotted_reading` (a phone's
    battery temperature), the worst taken before the runs.

    Args:
        figures: per job and phone (:func:`farm.results.spreads.phone_spreads`),
            all of one unit (the first's is used for the axis).
        path: the ``.png`` to write; its folder is created.
        title: the figure's title.

    Returns:
        ``path``.
    """
    figure, (left, right) = _figure(max(8.0, 1.2 * len(figures) + 4), 2)
    several = len({f.job_id for f in figures}) > 1
    labels = [_label(f, several) for f in figures]
    factor, unit = _scale(figures[0].unit if figures else "s")
    left.set_title("median per phone, 95% CI (lower is faster)", fontsize=10)
    left.set_ylabel(unit)
    shown = plotted_reading()
    right.set_title(f"{shown.shown_label if shown else 'no reading'} before the runs",
                    fontsize=10)
    right.set_ylabel(shown.unit if shown else "")
    if not figures:
        for axes in (left, right):
            axes.text(0.5, 0.5, "no results", ha="center", va="center", transform=axes.transAxes)
        figure.suptitle(title)
        return _save(figure, path)
    x = list(range(len(figures)))
    medians = [f.spread.median * factor for f in figures]
    below = [(f.spread.median - f.spread.ci_low) * factor for f in figures]
    above = [(f.spread.ci_high - f.spread.median) * factor for f in figures]
    colors = ["#c44e52" if f.noisy else "#4c72b0" for f in figures]
    left.bar(x, medians, yerr=[below, above], capsize=4, color=colors)
    left.set_xticks(x, labels, fontsize=7, rotation=20, ha="right")
    values = [f.readings.get(shown.name) if shown else None for f in figures]
    bars = right.bar(x, [v or 0.0 for v in values], color="#dd8452")
    right.bar_label(bars, labels=["-" if v is None else f"{v:.1f}" for v in values], fontsize=7)
    right.set_xticks(x, labels, fontsize=7, rotation=20, ha="right")
    figure.suptitle(f"{title} (red: noisy)" if any(f.noisy for f in figures) else title)
    return _save(figure, path)


def write_history_plot(figures: Sequence[PhoneSpread], path: Path, workload: str) -> Path:
    """One workload's median over time, one line per phone, 95% CIs as error bars.

    Args:
        figures: that workload's figures (:func:`farm.results.spreads.by_workload`);
            those without a finish time are left out.
        path: the ``.png`` to write; its folder is created.
        workload: the workload's label, for the title.

    Returns:
        ``path``.
    """
    figure, axes = _figure(10.0, 1)
    factor, unit = _scale(figures[0].unit if figures else "s")
    per_phone: dict[str, list[PhoneSpread]] = defaultdict(list)
    for f in figures:
        if f.finished_at is not None:
            per_phone[f.serial or "-"].append(f)
    for serial, mine in sorted(per_phone.items()):
        mine.sort(key=lambda f: f.finished_at)  # type: ignore[arg-type, return-value]
        axes.errorbar(
            [f.finished_at for f in mine], [f.spread.median * factor for f in mine],
            yerr=[[(f.spread.median - f.spread.ci_low) * factor for f in mine],
                  [(f.spread.ci_high - f.spread.median) * factor for f in mine]],
            marker="o", capsize=3, label=serial,
        )
    if per_phone:
        axes.legend(fontsize=8)
        figure.autofmt_xdate()
    else:
        axes.text(0.5, 0.5, "no results", ha="center", va="center", transform=axes.transAxes)
    axes.set_ylabel(f"median, {unit} (lower is faster)")
    axes.set_title(f"{workload}: median per phone over time, 95% CI", fontsize=10)
    return _save(figure, path)
