"""The job page's kernel profile chart: each phone's heaviest kernels as bars.

A ``model --profile`` job's result holds each phone's kernel profile
(:func:`farm.results.profiles.last_profiles`); the page draws the
:data:`~farm.results.profiles.TOP_KERNELS` heaviest of each as an inline SVG bar
chart, each kernel's whole name wrapped beside its bar (SVG text does not wrap
by itself), laid out here and drawn by the ``job.html`` template (no script, no
chart library: the profile is fixed once the job has finished, so the page
renders it when it is opened; ``job.js`` reloads a page that was open while
the job succeeded, once).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from farm.queue.store import Store
from farm.results.profiles import TOP_KERNELS, last_profiles

__all__ = ["BAR_H_PX", "LABEL_W_PX", "LINE_H_PX", "NAME_CHARS", "PLOT_W_PX", "KernelBar",
           "PhoneProfile", "name_lines", "profile_charts"]

#: Width of the kernel-name column, the bars' full width, and one bar's height, in SVG pixels.
LABEL_W_PX = 260
PLOT_W_PX = 360
BAR_H_PX = 22
#: Height of one line of a kernel's name, in SVG pixels.
LINE_H_PX = 14
#: Characters of a kernel's name on one line: the column less a 12 px gap, in a 12 px
#: monospace font (``dash.css``) whose glyphs are 0.6 em wide (DejaVu Sans Mono's 0.602 em).
NAME_CHARS = int((LABEL_W_PX - 12) / (12 * 0.602))


@dataclass(frozen=True)
class KernelBar:
    """One kernel's bar.

    Attributes:
        name: the kernel's symbol.
        total_ms: its time per inference, milliseconds.
        share_pct: its share of the kernels' sum, percent.
        width_px: the bar's length: ``PLOT_W_PX`` for the phone's heaviest kernel.
        y_px: the bar's top.
        lines: the whole name wrapped to the name column (:func:`name_lines`).
    """

    name: str
    total_ms: float
    share_pct: float
    width_px: float
    y_px: int
    lines: tuple[str, ...] = ()

    @property
    def height_px(self) -> int:
        """The row's height: one bar, or more where the name takes more lines."""
        return max(BAR_H_PX, len(self.lines) * LINE_H_PX + BAR_H_PX - LINE_H_PX)


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


def name_lines(name: str, width: int = NAME_CHARS) -> tuple[str, ...]:
    """A kernel's whole name in lines of at most ``width`` characters, broken after ``_``.

    Kernel names share long prefixes and suffixes (``tvmgen_default_fused_nn_conv2d_add``,
    ``..._conv2d_add_1``): cut to the column, two bars read the same; wrapped, each
    is whole. A part longer than a line is cut within. Joined, the lines are the name.
    """
    lines = [""]
    for part in re.split("(?<=_)", name):  # each part keeps its "_"
        left = part
        while left:
            room = width - len(lines[-1])
            if len(left) <= room:
                lines[-1], left = lines[-1] + left, ""
            elif lines[-1] and len(left) <= width:
                lines.append("")  # the part fits a line of its own: start one
            else:
                lines[-1], left = lines[-1] + left[:room], left[room:]
                if left:
                    lines.append("")
    return tuple(lines)


def _bars(kernels: list[dict[str, Any]]) -> list[KernelBar]:
    """The heaviest kernels as bars scaled to the heaviest, each row as high as its name.

    Sorted here, not taken in the stored order, so the chart's order is its own check.
    """
    timed = [(str(k.get("name")), float(k["total_ms"]), float(k.get("share_pct") or 0.0))
             for k in kernels if isinstance(k.get("total_ms"), (int, float))]
    timed.sort(key=lambda t: -t[1])
    top = timed[:TOP_KERNELS]
    longest_ms = top[0][1] if top and top[0][1] > 0 else 1.0
    bars: list[KernelBar] = []
    y_px = 0
    for name, ms, share in top:
        bar = KernelBar(name, ms, share, PLOT_W_PX * ms / longest_ms, y_px, name_lines(name))
        bars.append(bar)
        y_px += bar.height_px
    return bars


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
                                       sum(bar.height_px for bar in bars) or BAR_H_PX))
    return charts
