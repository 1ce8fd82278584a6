"""The job page's kernel profile chart: each phone's heaviest kernels as bars.

A ``model --profile`` job's result holds each phone's kernel profile
(:func:`farm.results.profiles.last_profiles`); the page draws the
:data:`~farm.results.profiles.TOP_KERNELS` heaviest of each as an inline SVG bar
chart, laid out here and drawn by the ``job.html`` template (no script, no
chart library: the profile is fixed once the job has finished, so the page
renders it when it is opened; ``job.js`` reloads a page that was open while
the job succeeded, once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from farm.queue.store import Store
from farm.results.profiles import TOP_KERNELS, last_profiles

__all__ = ["BAR_H_PX", "LABEL_W_PX", "PLOT_W_PX", "KernelBar", "PhoneProfile", "profile_charts"]

#: Width of the kernel-name column, the bars' full width, and one row's height, in SVG pixels.
LABEL_W_PX = 260
PLOT_W_PX = 360
BAR_H_PX = 22


@dataclass(frozen=True)
class KernelBar:
    """One kernel's bar.

    Attributes:
        name: the kernel's symbol.
        total_ms: its time per inference, milliseconds.
        share_pct: its share of the kernels' sum, percent.
        width_px: the bar's length: ``PLOT_W_PX`` for the phone's heaviest kernel.
        y_px: the bar's top.
    """

    name: str
    total_ms: float
    share_pct: float
    width_px: float
    y_px: int


@dataclass(frozen=True)
class PhoneProfile:
    """One phone's chart.

    Attributes:
        serial: the phone.
        bars: its heaviest kernels, heaviest first.
        kernels_ms: the sum of every kernel's time, milliseconds.
        model_ms: the whole model's time per inference, milliseconds.
        height_px: the SVG's height.
    """

    serial: str
    bars: list[KernelBar]
    kernels_ms: float
    model_ms: float
    height_px: int


def _bars(kernels: list[dict[str, Any]]) -> list[KernelBar]:
    """The heaviest kernels as bars scaled to the heaviest.

    Sorted here, not taken in the stored order, so the chart's order is its own check.
    """
    timed = [(str(k.get("name")), float(k["total_ms"]), float(k.get("share_pct") or 0.0))
             for k in kernels if isinstance(k.get("total_ms"), (int, float))]
    timed.sort(key=lambda t: -t[1])
    top = timed[:TOP_KERNELS]
    longest_ms = top[0][1] if top and top[0][1] > 0 else 1.0
    return [KernelBar(name, ms, share, PLOT_W_PX * ms / longest_ms, i * BAR_H_PX)
            for i, (name, ms, share) in enumerate(top)]


def profile_charts(store: Store, job_id: int) -> list[PhoneProfile]:
    """Each profiled phone of job ``job_id``'s results, by serial; empty without a profile."""
    charts: list[PhoneProfile] = []
    for view in store.results(job_id):
        for serial, profile in sorted(last_profiles(view).items()):
            kernels = profile.get("kernels")
            bars = _bars([k for k in kernels if isinstance(k, dict)]
                         if isinstance(kernels, list) else [])
            charts.append(PhoneProfile(serial, bars, float(profile.get("kernels_ms") or 0.0),
                                       float(profile.get("model_ms") or 0.0),
                                       max(len(bars), 1) * BAR_H_PX))
    return charts
