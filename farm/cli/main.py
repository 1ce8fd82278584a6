"""``farmctl``: the click group and its FarmError mapping.

A :class:`~farm.errors.FarmError` becomes ``Error: <message>`` on stderr and the
error's ``exit_code`` (2 for the user's mistakes, 1 otherwise), as click's own
exceptions do; any other exception is a bug and keeps its traceback.

Every command's help shows the defaults and marks required options
(:data:`CONTEXT_SETTINGS`, inherited by every subcommand), and ``-h`` is
``--help``. :func:`main` makes what farmctl writes private (:mod:`farm.privacy`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from farm import __version__, privacy
from farm.cli.state import LOCAL_ONLY
from farm.click_types import CONTEXT_SETTINGS
from farm.envvars import ENV_SERVER, ENV_TOKEN
from farm.errors import FarmError

__all__ = ["COMMANDS", "LAZY_LOGGING", "REMOTE_COMMANDS", "cli", "main"]

#: Every farmctl command: its module and attribute, and its one-line help for
#: ``farmctl --help``. A command's module is imported only when that command
#: runs (or its own ``--help`` is asked), so ``farmctl --version`` and ``jobs``
#: do not pay for scipy, TVM or the export code (issue 25: 2-4 s a call, before).
COMMANDS: dict[str, tuple[str, str]] = {
    "enqueue": ("farm.cli.enqueue:enqueue", "Queue a job (gemm, model, tune, ...)."),
    "jobs": ("farm.cli.jobs:jobs", "List jobs, newest first."),
    "job": ("farm.cli.jobs:job", "Show one job: spec, attempts, result."),
    "cancel": ("farm.cli.jobs:cancel", "Cancel a queued or running job."),
    "results": ("farm.cli.results:results", "Show results: per phone spread, or raw samples."),
    "logs": ("farm.cli.jobs:logs_", "Device and job events, oldest first."),
    "wait": ("farm.cli.jobs:wait", "Wait until a job ends; the exit code says how it ended."),
    "devices": ("farm.cli.devices:devices", "List the fleet's phones, boards and GPU hosts."),
    "drain": ("farm.cli.devices:drain", "Stop giving a phone new jobs (a running job finishes)."),
    "undrain": ("farm.cli.devices:undrain", "Give a drained phone jobs again."),
    "release": ("farm.cli.devices:release", "Take a phone out of quarantine."),
    "reserve": ("farm.cli.reserve:reserve", "Take a phone out of scheduling for a person."),
    "unreserve": ("farm.cli.reserve:unreserve", "End a reservation."),
    "reservations": ("farm.cli.reserve:reservations", "List reservations."),
    "demo": ("farm.cli.demo:demo", "Run the main job on virtual phones, then a table and a PNG."),
    "doctor": ("farm.cli.doctor:doctor", "Check adb, phones, tracker, tools and the database."),
    "export": ("farm.cli.export:export", "Write a tuned model's bundle, usable without farm."),
    "db": ("farm.cli.db:db", "The queue database's schema: show its revision, or upgrade it."),
    "compare": ("farm.cli.compare:compare", "Compare two jobs or runs per phone."),
    "profile": ("farm.cli.profile:profile", "A profiled model job's heaviest kernels per phone."),
    "hosts": ("farm.cli.hosts:hosts", "The farmd hosts sharing this database."),
    "records": ("farm.cli.records:records", "The fleet's tuning records: list, export, import."),
    "token": ("farm.cli.token:token", "The HTTP API's tokens: create, list, revoke."),
}

#: The commands ``--server`` runs through the HTTP API: all but the farm host's
#: own (:data:`farm.cli.state.LOCAL_ONLY`, refused in one line) and ``doctor``,
#: which checks this host and says so.
REMOTE_COMMANDS = [name for name in COMMANDS if name not in LOCAL_ONLY and name != "doctor"]

#: Commands whose path logs only through :func:`farm.logs.get_logger`, so their
#: logging is configured at the first event: they never import structlog
#: (0.15 s of CPU) unless they log (tests/unit/cli/test_cli_start.py). ``wait``
#: runs beside the attempt it waits for, on the same cores.
LAZY_LOGGING = frozenset({"jobs", "devices", "wait"})


class FarmGroup(click.Group):
    """farmctl's group: lazy subcommands, and FarmError as ``Error: ...`` with its exit code.

    The subcommands are :data:`COMMANDS`, imported on first use (click's
    "Defining the lazy group" recipe, docs/complex.md "Lazily Loading Subcommands").
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, without importing any."""
        return sorted(set(COMMANDS) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, its module imported now; None for an unknown name."""
        added = super().get_command(ctx, cmd_name)  # cli.add_command still works
        entry = COMMANDS.get(cmd_name)
        if added is not None or entry is None:
            return added
        if cmd_name not in LAZY_LOGGING:
            # The registries (farm.composition), once; a listing farmd answers needs
            # none, and installs them through CliState when it reads the database.
            from farm import composition

            composition.install()
        module_name, _, attribute = entry[0].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{entry[0]} is not a click command")
        return command

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """The command ``args`` names; an unknown name's error suggests the closest ones.

        click suggests among ``self.commands`` only, which holds none of the
        lazy :data:`COMMANDS`: ``farmctl enqeue`` said no more than "No such command".

        Raises:
            click.exceptions.NoSuchCommand: no such command (exit 2), with
                ``Did you mean 'enqueue'?`` when a name is close (difflib).
        """
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of ``--help`` from :data:`COMMANDS`' one-liners (no imports)."""
        rows = []
        for name in self.list_commands(ctx):
            added = self.commands.get(name)
            if added is not None and added.hidden:
                continue
            rows.append((name, added.get_short_help_str() if added else COMMANDS[name][1]))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

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
@click.version_option(__version__, prog_name="farmctl", message="%(prog)s %(version)s")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              envvar="FARM_CONFIG",
              help="farm's TOML config (default: $FARM_CONFIG, then /etc/farm/farm.toml).")
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error", "critical"]))
@click.option("--server", envvar=ENV_SERVER, metavar="URL",
              help="Use a farmd's HTTP API from any machine instead of the local database "
                   f"({', '.join(REMOTE_COMMANDS)}; {', '.join(sorted(LOCAL_ONLY))} refuse it, "
                   "doctor checks this host). Default: $FARM_SERVER.")
@click.option("--token", envvar=ENV_TOKEN, show_default=False,
              help="The API token for --server (farmctl token create). Default: $FARM_TOKEN.")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, log_level: str, server: str | None,
        token: str | None) -> None:
    """Queue benchmark and tuning jobs on the phone farm and read their results."""
    from farm import logs
    from farm.cli.state import CliState

    if ctx.invoked_subcommand in LAZY_LOGGING:
        logs.configure_on_first_use(level=log_level, stream=sys.stderr)
    else:
        logs.configure(level=log_level, stream=sys.stderr)
    state = CliState(config_path, server or None, token or None)
    ctx.obj = state
    ctx.call_on_close(state.close)


def main(argv: Sequence[str] | None = None) -> None:
    """Console script entry point ``farmctl``; what it writes is readable by its user only."""
    privacy.restrict_umask()
    cli.main(args=list(argv) if argv is not None else None, prog_name="farmctl")


if __name__ == "__main__":  # python -m farm.cli.main, as tests run farmctl in subprocesses
    main()
