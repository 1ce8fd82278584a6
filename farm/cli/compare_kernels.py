"""``farmctl compare A B``'s kernel table: which kernels' time changed most, per phone.

Shown when A and B are both job ids of profiled model jobs (``enqueue model
--profile``) with a phone in common; ``--operators`` asks for it and makes its
absence an error. The figures are :func:`farm.results.profiles.kernel_changes`.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

import click

from farm.cli.output import Column, print_table
from farm.errors import UserFault
from farm.queue.store import Store
from farm.results.profiles import TOP_KERNELS, kernel_changes, last_profiles

__all__ = ["KERNEL_COLUMNS", "job_profiles", "kernel_change_rows", "kernels_by_phone",
           "print_kernel_changes"]

KERNEL_COLUMNS = [Column("name", "kernel"), Column("a_ms", "A ms", "right"),
                  Column("b_ms", "B ms", "right"), Column("ratio", "B/A", "right"),
                  Column("change_ms", "change ms", "right")]


def job_profiles(store: Store, ref: str) -> dict[str, dict[str, Any]]:
    """Serial -> the profile of that phone's last profiled run of job ``ref``.

    Empty when ``ref`` is no plain job id (a run id, ``N:untuned``) or the job
    has no profile.
    """
    if not ref.strip().isdigit():
        return {}
    return {serial: profile for view in store.results(int(ref))
            for serial, profile in last_profiles(view).items()}


def kernels_by_phone(store: Store, a: str, b: str, *,
                     required: bool) -> dict[str, list[dict[str, Any]]]:
    """Per phone profiled in both A and B: every kernel's change, largest first (JSON-ready).

    Raises:
        UserFault: ``required`` and A and B have no profiled phone in common.
    """
    a_profiles, b_profiles = job_profiles(store, a), job_profiles(store, b)
    common = sorted(a_profiles.keys() & b_profiles.keys())
    if required and not common:
        raise UserFault(f"--operators needs two model jobs enqueued with --profile that ran on "
                        f"a phone in common: {a} and {b} are not (profiled phones: "
                        f"{', '.join(sorted(a_profiles)) or 'none'} and "
                        f"{', '.join(sorted(b_profiles)) or 'none'})")
    return {serial: [asdict(c) for c in kernel_changes(a_profiles[serial], b_profiles[serial])]
            for serial in common}


def kernel_change_rows(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The :data:`~farm.results.profiles.TOP_KERNELS` largest changes as table rows."""
    return [{"name": c["name"], "a_ms": f"{c['a_ms']:.4f}", "b_ms": f"{c['b_ms']:.4f}",
             "ratio": f"{c['ratio']:.3f}" if c["ratio"] is not None else None,
             "change_ms": f"{c['change_ms']:+.4f}"} for c in changes[:TOP_KERNELS]]


def print_kernel_changes(by_phone: dict[str, list[dict[str, Any]]]) -> None:
    """One table per phone: the kernels whose time changed most."""
    for serial, changes in by_phone.items():
        title = f"kernels on {serial}, largest change first"
        if not sys.stdout.isatty():  # piped tables carry no title (as compare's own)
            click.echo(f"# {title}")
        print_table(kernel_change_rows(changes), KERNEL_COLUMNS, title)
