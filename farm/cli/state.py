"""What every farmctl command shares: settings, the queue, the store, and whether farmd runs.

The store is opened on first use and closed when the command ends. Opening it
migrates the schema, so ``farmctl enqueue`` works (and is durable) before farmd
ever ran.

Commands that also work from any machine read :attr:`CliState.queue`: the
local :class:`~farm.api.service.FarmService` over the store, or, with
``--server URL`` (``FARM_SERVER``), the API's client
(:class:`farm.client.remote.RemoteService`) with the token of ``--token``
(``FARM_TOKEN``). Commands that need the farm host itself (:data:`LOCAL_ONLY`:
its database, its files, its adb) read :attr:`CliState.store` or call
:meth:`CliState.require_local`, which refuse under ``--server`` in one line
naming the command and why the API cannot serve it.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from farm.errors import ConfigError, UserFault

if TYPE_CHECKING:
    from farm.api.interface import Queue
    from farm.client.remote import RemoteService
    from farm.config import Settings
    from farm.queue.store import Store
    from farm.runner.pidfile import FarmdStatus

__all__ = ["LOCAL_ONLY", "CliState", "login_name", "pass_state", "warn_if_no_farmd"]

#: The farmctl commands ``--server`` does not run, and why the HTTP API cannot
#: serve them; every other command works through it (``doctor`` checks this
#: host and says so), but for an option that needs the host (``results --regressions``).
LOCAL_ONLY: dict[str, str] = {
    "compare": "reads both sides' samples from the farm host's database (the dashboard's "
               "compare page compares from anywhere)",
    "logs": "reads device events from the farm host's database, which the API does not "
            "serve ('farmctl job ID' shows a job's attempts)",
    "db": "reads or migrates the farm host's database schema",
    "token": "reads and writes the API's tokens in the farm host's database",
    "records": "reads and writes the tuning records in the farm host's database",
    "demo": "starts a farm of its own (farmd, virtual phones) on this machine",
}


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
    listed_by_farmd: bool = field(default=False, repr=False)

    @property
    def settings(self) -> Settings:
        """The settings, loaded once.

        Raises:
            ConfigError: the configuration is invalid.
        """
        if self._settings is None:
            from farm.config import load_config  # pydantic: not for a listing farmd answers

            self._settings = load_config(self.config_path)
        return self._settings

    @property
    def store(self) -> Store:
        """The queue, opened (and migrated) once.

        Raises:
            StoreError: the database cannot be opened; with ``database.auto_migrate``
                off, its schema is older than this farm's (run ``farmctl db upgrade``).
            UserFault: under ``--server`` (:meth:`require_local`).
        """
        self.require_local()
        if self._store is None:
            from farm import composition
            from farm.queue.store import Store  # SQLAlchemy: not for a listing farmd answers

            composition.install()  # the kinds the queue reads specs by; what a listing shows

            self._store = Store(self.settings.database_url,
                                auto_migrate=self.settings.database.auto_migrate)
        return self._store

    def require_local(self, option: str | None = None, why: str | None = None) -> None:
        """Refuse, under ``--server``, a command (or one of its options) that needs the farm host.

        Args:
            option: the option that needs it (``--regressions``); None: the command.
            why: what it does there that the API cannot; None: the command's
                :data:`LOCAL_ONLY` reason.

        Raises:
            UserFault: ``--server`` (or ``FARM_SERVER``) is set: the message names
                the command (and option) and why.
        """
        if self.server is None:
            return
        context = click.get_current_context(silent=True)
        words = ["farmctl", *(context.command_path.split()[1:] if context is not None else [])]
        why = why or LOCAL_ONLY.get(words[1] if len(words) > 1 else "",
                                    "works on the farm host's database")
        what = " ".join(words + ([option] if option else []))
        raise UserFault(f"{what} runs on a farm host, not through --server: it {why}")

    @property
    def remote(self) -> RemoteService:
        """The API's client (``--server``), for what only it does (a bundle's download).

        Raises:
            RuntimeError: no ``--server``: a command asked for it on the local path.
            UserFault: ``--server`` is not an http(s) URL.
        """
        if self.server is None:
            raise RuntimeError("CliState.remote without --server")
        if self._remote is None:
            from farm import composition
            from farm.client.remote import RemoteService  # httpx loads only when used

            composition.install()
            self._remote = RemoteService(self.server, self.token)
        return self._remote

    @property
    def queue(self) -> Queue:
        """The queue as this user sees it: the local service, or the API's client.

        Raises:
            StoreError: the local database cannot be opened.
            UserFault: ``--server`` is not an http(s) URL.
        """
        if self._queue is None:
            if self.server is not None:
                self._queue = self.remote
            else:
                from farm.api.service import FarmService
                from farm.clock import SystemClock
                from farm.runner.wake import send_wake

                data_dir = Path(self.settings.data_dir)
                self._queue = FarmService(self.store, self.settings, SystemClock(),
                                          wake=lambda: send_wake(data_dir),
                                          local_owner=login_name())
        return self._queue

    def listing(self, name: str, args: dict[str, Any]) -> Any:
        """A listing of :mod:`farm.api.listings` (``jobs``, ``devices``), from farmd if it runs.

        farmd answers on its local socket (:mod:`farm.api.local`) with the rows
        it builds from this user's settings and its open store, so farmctl
        imports neither pydantic nor SQLAlchemy (issue 25: 0.6 of farmctl's
        0.7 CPU seconds). Without a farmd for the data folder the file or the
        environment names (with none named, the default folder is known only
        to :mod:`farm.config`), or if it does not answer, the rows are built
        here on the database, by the same builder. :attr:`listed_by_farmd`
        says which happened.

        Args:
            name: the builder: ``jobs`` (:func:`~farm.api.listings.job_listing`)
                or ``devices`` (:func:`~farm.api.listings.device_listing`).
            args: its keyword arguments (JSON types).

        Raises:
            ConfigError, StoreError: as :attr:`settings` and :attr:`store` raise.
        """
        if self.server is None:
            from farm.api.local import ask_farmd
            from farm.config_source import DEFAULT_DATA_DIR, config_data

            try:
                data, _ = config_data(self.config_path, os.environ)
            except ConfigError:
                data = {}  # load_config below says what is wrong
            data_dir = data.get("data_dir", DEFAULT_DATA_DIR)
            if isinstance(data_dir, str):
                answer = ask_farmd(Path(data_dir).expanduser(), name, data, args)
                if answer is not None:
                    self.listed_by_farmd = True
                    return answer
        from farm.api import listings

        if name == "jobs":
            return listings.job_listing(self.queue, **args)
        return listings.device_listing(self.queue, **args)

    def farmd(self) -> FarmdStatus:
        """Whether a farmd runs for this data folder."""
        from farm.runner.pidfile import farmd_status

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
