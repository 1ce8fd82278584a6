"""What every farmctl command shares: settings, the store, and whether farmd runs.

The store is opened on first use and closed when the command ends. Opening it
migrates the schema, so ``farmctl enqueue`` works (and is durable) before farmd
ever ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import click

from farm.config import Settings, load_config
from farm.queue.store import Store
from farm.runner.pidfile import FarmdStatus, farmd_status

__all__ = ["CliState", "pass_state", "warn_if_no_farmd"]


@dataclass
class CliState:
    """Per-invocation state, kept in ``click.Context.obj``.

    Attributes:
        config_path: ``--config``; None means farm's default lookup.
    """

    config_path: Path | None = None
    _settings: Settings | None = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)

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
        if self._store is None:
            self._store = Store(self.settings.database_url,
                                auto_migrate=self.settings.database.auto_migrate)
        return self._store

    def farmd(self) -> FarmdStatus:
        """Whether a farmd runs for this data folder."""
        return farmd_status(Path(self.settings.data_dir))

    def close(self) -> None:
        """Close the store if it was opened."""
        if self._store is not None:
            self._store.close()
            self._store = None


pass_state = click.make_pass_decorator(CliState)


def warn_if_no_farmd(state: CliState, what: str = "queued jobs wait until it starts") -> bool:
    """Say on stderr when no farmd is running; return whether one is."""
    status = state.farmd()
    if not status.running:
        click.echo(f"note: no farmd is running ({status.reason}); {what}", err=True)
    return status.running
