"""What a model result holds beyond its samples: kernel profiles, and outputs on the user's inputs.

A ``model --profile`` job's runs carry ``profile`` (:class:`farm.jobs.profile.KernelProfile`
as a dict); each phone's last run with one is shown, the heaviest kernels first.
A ``model --inputs`` job's runs name their outputs' blob (``outputs_sha256``);
:func:`write_job_outputs` writes each phone's last as ``.npy`` files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from farm.cli.output import Column, note, print_table
from farm.errors import UserFault
from farm.queue.records import ResultView
from farm.results.profiles import TOP_KERNELS, last_profiles

if TYPE_CHECKING:
    from farm.api.interface import Queue

__all__ = ["PROFILE_COLUMNS", "print_profiles", "profile_rows",
           "write_job_outputs"]

PROFILE_COLUMNS = [Column("kernel"), Column("calls", justify="right"),
                   Column("per_call", "per call", "right"), Column("total", justify="right"),
                   Column("share", "% of kernels", "right")]


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


def write_job_outputs(queue: Queue, job_id: int, folder: Path) -> list[Path]:
    """Write each phone's outputs of job ``job_id`` as ``<folder>/<serial>/<output name>.npy``.

    Args:
        queue: the farm (:class:`farm.api.interface.Queue`: local, or ``--server``'s).
        job_id: a finished ``model --inputs`` job.
        folder: where to write; made if missing.

    Returns:
        The files written.

    Raises:
        NotFound: no such job, or it kept no outputs.
        UserFault: the folder cannot be written.
    """
    from farm.jobs.model_io import write_outputs

    written: list[Path] = []
    try:
        for serial, data in queue.outputs(job_id).items():
            written += write_outputs(data, folder / serial)
    except OSError as exc:
        raise UserFault(f"cannot write the outputs into {folder}: "
                        f"{exc.strerror or exc}") from None
    note(f"{len(written)} output files written under {folder}")
    return written
