"""What every farmctl command shares: settings, the queue, the store, and whether farmd runs.

The store is opened on first use and closed when the command ends. Opening it
migrates the schema, so ``farmctl enqueue`` works (and is durable) before farmd
ever ran.

Commands that also work from any machine read :attr:`CliState.queue`: the
local :class:`~farm.api.service.FarmService` over the store, or, with
``--server URL`` (``FARM_SERVER``), the API's client
(:class:`farm.cli.remote.RemoteService`) with the token of ``--token``
(``FARM_TOKEN``). Commands that need the database itself (tokens, logs,
export...) read :attr:`CliState.store`, which refuses under ``--server``.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from farm.clock import SystemClock
from farm.config import Settings, load_config
from farm.errors import UserFault
from farm.queue.store import Store
from farm.runner.pidfile import FarmdStatus, farmd_status
from farm.runner.wake import send_wake

if TYPE_CHECKING:
    from farm.api.service import Queue
    from farm.cli.remote import RemoteService

__all__ = ["CliState", "login_name", "pass_state", "warn_if_no_farmd"]


def login_name() -> str | None:
    """The local user's login name (jobs queued here carry it as owner); None if unknown."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no $USER (a container)
        return None


@dataclass
class CliState:
    """Per-invocation state, kept in ``click.Context.obj``.

    Attributes:
        config_path: ``--config``; None means farm's default lookup.
        server: ``--server``: the API's URL; None works on the local database.
        token: ``--token``: the API token sent to ``server``.
    """

    config_path: Path | None = None
    server: str | None = None
    token: str | None = field(default=None, repr=False)
    _settings: Settings | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)
    _queue: Queue | None = field(default=None, repr=False)
    _remote: RemoteService | None = field(default=None, repr=False)

    @property
    def settings(self) -> Settings:
        """The settings, loaded once.

        Raises:
            ConfigError: the configuration is invalid.
        """
        if self._settings is None:
            self._settings = load_config(self.config_path)
        return self._settings

    @property
    def store(self) -> Store:
        """The queue, opened (and migrated) once.

        Raises:
            StoreError: the database cannot be opened; with ``database.auto_migrate``
                off, its schema is older than this farm's (run ``farmctl db upgrade``).
        """
        if self.server is not None:
            command = click.get_current_context(silent=True)
            name = command.command_path if command is not None else "this command"
            raise UserFault(f"{name} works on a farm host's database, not through --server")
        if self._store is None:
            import farm.kinds  # noqa: F401 - installs the job kinds the queue reads specs by

            self._store = Store(self.settings.database_url,
                                auto_migrate=self.settings.database.auto_migrate)
        return self._store

    @property
    def queue(self) -> Queue:
        """The queue as this user sees it: the local service, or the API's client.

        Raises:
            StoreError: the local database cannot be opened.
            UserFault: ``--server`` is not an http(s) URL.
        """
        if self._queue is None:
            if self.server is not None:
                from farm.cli.remote import RemoteService  # httpx loads only when used

                self._remote = RemoteService(self.server, self.token)
                self._queue = self._remote
            else:
                from farm.api.service import FarmService

                data_dir = Path(self.settings.data_dir)
                self._queue = FarmService(self.store, self.settings, SystemClock(),
                                          wake=lambda: send_wake(data_dir),
                                          local_owner=login_name())
        return self._queue

    def farmd(self) -> FarmdStatus:
        """Whether a farmd runs for this data folder."""
        return farmd_status(Path(self.settings.data_dir))

    def close(self) -> None:
        """Close the store and the API client if they were opened."""
        if self._remote is not None:
            self._remote.close()
            self._remote = None
        self._queue = None
        if self._store is not None:
            self._store.close()
            self._store = None


pass_state = click.make_pass_decorator(CliState)


def warn_if_no_farmd(state: CliState, what: str = "queued jobs wait until it starts") -> bool:
    """Say on stderr when no farmd is running; return whether one is.

    Through ``--server`` a farmd answered, so nothing is said.
    """
    if state.server is not None:
        return True
    status = state.farmd()
    if not status.running:
        click.echo(f"note: no farmd is running ({status.reason}); {what}", err=True)
    return status.running
