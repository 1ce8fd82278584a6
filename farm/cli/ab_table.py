"""The A/B table of ``farmctl job`` and ``farmctl results``: each phone's verdict of B against A."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from farm.cli.output import Column, print_table
from farm.results.ab import ab_phones

if TYPE_CHECKING:
    from farm.queue.records import ResultView

__all__ = ["print_ab"]

_COLUMNS = [
    Column("serial", "phone"), Column("median_a", "A median", "right"),
    Column("median_b", "B median", "right"), Column("ratio", "B/A", "right"),
    Column("ci", "CI", "right"), Column("rounds", justify="right"),
    Column("phone", "phone time", "right"), Column("verdict"), Column("why"),
]


def _row(phone: dict[str, Any]) -> dict[str, Any]:
    def ms(value: float | None) -> str | None:
        return None if value is None else f"{value:.4g} ms"

    ci = (f"{phone['ci_low']:.3f}..{phone['ci_high']:.3f}"
          if phone["ci_low"] is not None and phone["ci_high"] is not None else None)
    return {**phone, "median_a": ms(phone["median_a_ms"]), "median_b": ms(phone["median_b_ms"]),
            "ratio": None if phone["ratio"] is None else f"{phone['ratio']:.3f}", "ci": ci,
            "phone": None if phone["phone_s"] is None else f"{phone['phone_s']:.1f} s"}


def print_ab(result: ResultView) -> bool:
    """Print ``result``'s A/B table, its sides named first; False (nothing printed) otherwise."""
    phones = ab_phones(result.summary)
    if not phones:
        return False
    summary = result.summary
    click.echo(f"A: {summary.get('a')}\nB: {summary.get('b')}")
    print_table([_row(p) for p in phones], _COLUMNS, "B against A, per phone (A/B rounds)")
    return True
