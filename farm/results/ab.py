"""An A/B job's verdicts as rows: one per phone, from its result's summary (pure).

The ``ab`` kind (:mod:`farm.kinds.ab`) stores per phone the verdict of B
against A, the median ratio of its rounds with the interval, the rounds and
phone time it took. ``farmctl job``, ``farmctl results``, the dashboard and
the client read them through :func:`ab_phones`, so each says the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ab_phones", "is_ab"]


def is_ab(summary: Mapping[str, Any]) -> bool:
    """The summary is an A/B job's."""
    return summary.get("kind") == "ab" and isinstance(summary.get("per_serial"), Mapping)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def ab_phones(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per phone of an A/B result: its verdict and figures; empty for other results.

    Returns:
        Rows by serial with ``serial``, ``a`` and ``b`` (the builds' labels),
        ``verdict``, ``ratio`` (median B/A), ``ci_low``/``ci_high``, ``p_value``,
        ``rounds``, ``phone_s``, ``median_a_ms``/``median_b_ms`` and ``why``
        (the verdict's reason; "both sides ran the same library" when they did).
        Values missing from the summary (another farm version's) are None.
    """
    if not is_ab(summary):
        return []
    rows = []
    for serial, figures in sorted(summary["per_serial"].items()):
        if not isinstance(figures, Mapping):
            continue
        why = str(figures.get("reason") or "")
        if figures.get("same_library"):
            why = f"both sides ran the same library; {why}"
        median_a, median_b = (_number(figures.get(k)) for k in ("median_a_s", "median_b_s"))
        rows.append({
            "serial": serial, "a": summary.get("a"), "b": summary.get("b"),
            "verdict": figures.get("verdict"), "ratio": _number(figures.get("ratio")),
            "ci_low": _number(figures.get("ci_low")), "ci_high": _number(figures.get("ci_high")),
            "p_value": _number(figures.get("p_value")), "rounds": figures.get("rounds"),
            "phone_s": _number(figures.get("phone_s")),
            "median_a_ms": None if median_a is None else median_a * 1e3,
            "median_b_ms": None if median_b is None else median_b * 1e3,
            "why": why,
        })
    return rows
