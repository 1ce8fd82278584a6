"""Stored kernel profiles: each phone's last, and which kernels changed most between builds.

A ``model --profile`` job's runs carry ``profile`` (:class:`farm.jobs.profile.KernelProfile`
as a dict); :func:`last_profiles` picks each phone's last run with one (``farmctl
profile``, ``farmctl results --job``, the job page's chart, ``farm.client``).

``farmctl compare A B`` of two profiled model jobs (``enqueue model --profile``,
untuned and ``--tuned N``, or two commits of a model) says per phone whether B
is slower; this says where: per kernel name, its time in A and in B (summed
over the calls with every argument shape, :class:`farm.jobs.profile.KernelTime`'s
``total_ms``), B/A and the change, largest absolute change first. A kernel only
one build has (the other fused differently) counts 0 ms on the other side.

Both builds run the same fusion passes (:func:`farm.jobs.model.tunable_module`),
so one model's kernel names match across untuned and tuned builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from farm.queue.records import ResultView

__all__ = ["TOP_KERNELS", "KernelChange", "kernel_changes", "kernel_totals", "last_profiles"]

#: Kernels listed (or charted) per phone; sums still count every kernel.
TOP_KERNELS = 10


def last_profiles(view: ResultView) -> dict[str, dict[str, Any]]:
    """Serial -> the profile of that phone's last run that has one."""
    runs = view.summary.get("runs")
    last: dict[str, dict[str, Any]] = {}
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, dict) and isinstance(run.get("profile"), dict):
            last[str(run.get("serial"))] = run["profile"]
    return last


@dataclass(frozen=True)
class KernelChange:
    """One kernel's time in build A and in build B on one phone.

    Attributes:
        name: the kernel's symbol, e.g. ``"fused_conv2d_add_relu"``.
        a_ms: its time per inference in A, milliseconds (0 when A lacks it).
        b_ms: the same in B.
        ratio: ``b_ms / a_ms``; None when A lacks it (0 ms).
        change_ms: ``b_ms - a_ms``: positive when B spends more time in it.
    """

    name: str
    a_ms: float
    b_ms: float
    ratio: float | None
    change_ms: float


def kernel_totals(profile: Mapping[str, Any]) -> dict[str, float]:
    """Kernel name -> its time per inference in ``profile``, milliseconds.

    Args:
        profile: one phone's profile as stored (``kernels``: dicts with ``name``
            and ``total_ms``); entries of other shapes are skipped.
    """
    totals: dict[str, float] = {}
    kernels = profile.get("kernels")
    for kernel in kernels if isinstance(kernels, list) else []:
        if isinstance(kernel, dict) and isinstance(kernel.get("total_ms"), (int, float)):
            name = str(kernel.get("name"))
            totals[name] = totals.get(name, 0.0) + float(kernel["total_ms"])
    return totals


def kernel_changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[KernelChange]:
    """Every kernel of either profile, largest absolute change of time first.

    Args:
        a: build A's profile on a phone (as :func:`kernel_totals` reads it).
        b: build B's profile on the same phone.

    Returns:
        One :class:`KernelChange` per kernel name; ties keep the name order.
    """
    a_ms, b_ms = kernel_totals(a), kernel_totals(b)
    changes = [KernelChange(name, a_ms.get(name, 0.0), b_ms.get(name, 0.0),
                            b_ms.get(name, 0.0) / a_ms[name] if a_ms.get(name) else None,
                            b_ms.get(name, 0.0) - a_ms.get(name, 0.0))
               for name in sorted(a_ms.keys() | b_ms.keys())]
    return sorted(changes, key=lambda c: -abs(c.change_ms))
