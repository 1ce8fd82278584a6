"""``farmctl db status | upgrade``: the queue database's schema revision.

With ``[database] auto_migrate = true`` (the default) farmd and farmctl migrate
the schema when they open the database, so these commands are only for looking.
A team that upgrades explicitly sets it false and runs ``farmctl db upgrade``
once (from any host) after installing a newer farm; until then every farmd and
farmctl refuses the database with a one-line error naming this command.

Neither command opens a :class:`~farm.queue.store.Store` (that would migrate, or
refuse an old schema): they use :func:`farm.queue.db.revisions` and
:func:`farm.queue.db.migrate` directly, as ``farmctl doctor`` does.
"""

from __future__ import annotations

from pathlib import Path

import click
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from farm.cli.output import echo_json
from farm.cli.state import CliState, pass_state
from farm.errors import StoreError
from farm.queue import db as queue_db

__all__ = ["db"]


@click.group("db")
@pass_state
def db(state: CliState) -> None:
    """The queue database's schema: show its revision, or upgrade it."""
    state.require_local()  # the settings' database is this host's, never --server's


@db.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@pass_state
def status(state: CliState, as_json: bool) -> None:
    """Show the schema's revision and the newest one this farm knows; changes nothing.

    A SQLite file that does not exist yet is reported as never migrated and is not created.
    """
    url = state.settings.database_url
    current, head = _revisions(url)
    shown = sa.engine.make_url(url).render_as_string(hide_password=True)
    if as_json:
        echo_json({"database": shown, "current": current, "head": head,
                   "up_to_date": current == head})
        return
    click.echo(f"database: {shown}")
    click.echo(f"current:  {current or 'none (never migrated)'}")
    click.echo(f"head:     {head}")
    click.echo("up to date" if current == head else "behind: run 'farmctl db upgrade'")


@db.command("upgrade")
@pass_state
def upgrade(state: CliState) -> None:
    """Migrate the schema to the newest revision (once, however many hosts run it together)."""
    url = state.settings.database_url
    engine = queue_db.create_engine(url)
    try:
        before = queue_db.migrate(engine)
        current, head = _read(engine)
    finally:
        engine.dispose()
    shown = sa.engine.make_url(url).render_as_string(hide_password=True)
    if before == current:
        click.echo(f"{shown} is already at the newest revision {head}")
    else:
        click.echo(f"{shown} upgraded from {before} to {current}")


def _revisions(url: str) -> tuple[str | None, str]:
    """``(current, head)`` of the database at ``url``, creating nothing.

    Raises:
        StoreError: the database cannot be opened or read.
    """
    engine = queue_db.create_engine(url)
    try:
        database = engine.url.database
        if (engine.dialect.name == "sqlite" and database and database != ":memory:"
                and not database.startswith("file:") and not Path(database).is_file()):
            return None, queue_db.head_revision()  # connecting would create the file
        return _read(engine)
    finally:
        engine.dispose()


def _read(engine: sa.Engine) -> tuple[str | None, str]:
    try:
        with engine.connect() as connection:
            return queue_db.revisions(connection)
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read the schema revision: {exc}") from exc
