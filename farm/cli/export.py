"""``farmctl export JOB_ID --out DIR``: a finished model-tuning job as a deployment bundle.

The bundle (:mod:`farm.jobs.bundle`) holds the compiled library, the MetaSchedule
database, the model, a manifest and a README; nothing in it needs farm. Errors
are one line, exit code 2: an unknown job, a job that is not a tune of a model,
one that has not succeeded, an ``--out`` that exists and is not empty.

With ``--server`` the farm host builds the same bundle (the dashboard's
download, ``GET /api/v1/dashboard/jobs/{id}/export.zip``) and farmctl unpacks
it into ``--out`` (:meth:`farm.client.remote.RemoteService.export`).
"""

from __future__ import annotations

from pathlib import Path

import click

from farm.cli.state import CliState, pass_state
from farm.click_types import JOB_ID

__all__ = ["export"]


@click.command("export")
@click.argument("job_id", type=JOB_ID)
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Folder to create (or an empty one) for the bundle.")
@pass_state
def export(state: CliState, job_id: int, out: Path) -> None:
    """Write a finished model-tuning job's library, database and manifest to --out."""
    if state.server is not None:
        state.remote.export(job_id, out)
        click.echo(f"job {job_id} exported to {out}")
        return
    # Imported here: the bundle's writer and the compile cache are the farm host's.
    from farm.jobs.bundle import write_bundle
    from farm.jobs.cache import CompileCache
    from farm.kinds.run import COMPILE_CACHE_DIR
    from farm.kinds.tuned import finished_tune

    data_dir = Path(state.settings.data_dir)
    tune = finished_tune(state.store, data_dir, job_id, field="JOB_ID")
    write_bundle(tune.bundle_input(state.store, data_dir), out.expanduser(),
                 CompileCache(data_dir / COMPILE_CACHE_DIR))
    click.echo(f"job {job_id} exported to {out}")
