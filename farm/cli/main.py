"""``farmctl``: the click group and its FarmError mapping.

A :class:`~farm.errors.FarmError` becomes ``Error: <message>`` on stderr and the
error's ``exit_code`` (2 for the user's mistakes, 1 otherwise), as click's own
exceptions do; any other exception is a bug and keeps its traceback.

Every command's help shows the defaults and marks required options
(:data:`CONTEXT_SETTINGS`, inherited by every subcommand), and ``-h`` is
``--help``. :func:`main` makes what farmctl writes private (:mod:`farm.privacy`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from farm import logs, privacy
from farm.cli import db, demo, devices, doctor, enqueue, export, jobs, reserve, results, token
from farm.cli.compare import compare
from farm.cli.hosts import hosts
from farm.cli.params import CONTEXT_SETTINGS
from farm.cli.state import CliState
from farm.config import ENV_SERVER, ENV_TOKEN
from farm.errors import FarmError

__all__ = ["cli", "main"]


class FarmGroup(click.Group):
    """A click group that turns FarmError into ``Error: ...`` and its exit code."""

    def invoke(self, ctx: click.Context) -> object:
        """Run the subcommand, mapping FarmError at this one boundary."""
        try:
            return super().invoke(ctx)
        except FarmError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=FarmGroup, context_settings=CONTEXT_SETTINGS,
             epilog="Exit codes: 0 success; 1 a failure (of the job, a phone, a service); "
                    "2 a usage error or wrong input. 'farmctl wait' adds 124 for --timeout; "
                    "'farmctl compare' 3 when a phone is slower.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              envvar="FARM_CONFIG",
              help="farm's TOML config (default: $FARM_CONFIG, then /etc/farm/farm.toml).")
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error", "critical"]))
@click.option("--server", envvar=ENV_SERVER, metavar="URL",
              help="Use a farmd's HTTP API from any machine instead of the local database "
                   "(devices, jobs, job, enqueue, cancel, results, wait, drain, undrain, "
                   "release, reserve, unreserve, reservations, hosts). Default: $FARM_SERVER.")
@click.option("--token", envvar=ENV_TOKEN, show_default=False,
              help="The API token for --server (farmctl token create). Default: $FARM_TOKEN.")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, log_level: str, server: str | None,
        token: str | None) -> None:
    """Queue benchmark and tuning jobs on the phone farm and read their results."""
    logs.configure(level=log_level, stream=sys.stderr)
    state = CliState(config_path, server or None, token or None)
    ctx.obj = state
    ctx.call_on_close(state.close)


cli.add_command(enqueue.enqueue)
for command in (jobs.jobs, jobs.job, jobs.cancel, results.results, jobs.logs_, jobs.wait,
                devices.devices, devices.drain, devices.undrain, devices.release,
                reserve.reserve, reserve.unreserve, reserve.reservations,
                demo.demo, doctor.doctor, export.export, db.db):
    cli.add_command(command)
cli.add_command(compare)
cli.add_command(hosts)
cli.add_command(token.token)


def main(argv: Sequence[str] | None = None) -> None:
    """Console script entry point ``farmctl``; what it writes is readable by its user only."""
    privacy.restrict_umask()
    cli.main(args=list(argv) if argv is not None else None, prog_name="farmctl")


if __name__ == "__main__":  # python -m farm.cli.main, as tests run farmctl in subprocesses
    main()
