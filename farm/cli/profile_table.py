"""The per-kernel profile of a model result as tables: one per phone, the heaviest kernels first.

A ``model --profile`` job's runs carry ``profile`` (:class:`farm.jobs.profile.KernelProfile`
as a dict); each phone's last run with one is shown.
"""

from __future__ import annotations

from typing import Any

import click

from farm.cli.output import Column, print_table
from farm.queue.records import ResultView

__all__ = ["PROFILE_COLUMNS", "print_profiles", "profile_rows"]

#: Kernels listed per phone; the sum line still counts every kernel.
TOP_KERNELS = 10

PROFILE_COLUMNS = [Column("kernel"), Column("calls", justify="right"),
                   Column("per_call", "per call", "right"), Column("total", justify="right"),
                   Column("share", "% of kernels", "right")]


def last_profiles(view: ResultView) -> dict[str, dict[str, Any]]:
    """Serial -> the profile of that phone's last run that has one."""
    runs = view.summary.get("runs")
    last: dict[str, dict[str, Any]] = {}
    for run in runs if isinstance(runs, list) else []:
        if isinstance(run, dict) and isinstance(run.get("profile"), dict):
            last[str(run.get("serial"))] = run["profile"]
    return last


def profile_rows(profile: dict[str, Any]) -> list[dict[str, Any]]:
    """The heaviest :data:`TOP_KERNELS` kernels of one profile as table rows."""
    return [{"kernel": k["name"], "calls": k["calls"], "per_call": f"{k['per_call_ms']:.4f} ms",
             "total": f"{k['total_ms']:.4f} ms", "share": f"{k['share_pct']:.1f}"}
            for k in profile.get("kernels", [])[:TOP_KERNELS]]


def print_profiles(view: ResultView) -> None:
    """Per phone: the kernels' sum against the whole model's time, then its table."""
    for serial, profile in last_profiles(view).items():
        line = (f"kernels on {serial}: sum {profile['kernels_ms']:.4f} ms of the model's "
                 f"{profile['model_ms']:.4f} ms ({100 * profile['ratio']:.0f}%)")
        if profile.get("missing"):
            line += f"; not in the kernel library: {', '.join(profile['missing'])}"
        click.echo(line)
        print_table(profile_rows(profile), PROFILE_COLUMNS, f"kernels on {serial}")
