"""``farmctl db status | upgrade`` and ``[database] auto_migrate = false``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from farm.cli.main import cli
from farm.errors import StoreError
from farm.queue import Store
from farm.queue.db import head_revision


@pytest.fixture
def manual(tmp_path: Path) -> tuple[Path, str]:
    """A config with auto_migrate off, and its database URL (not created yet)."""
    path = tmp_path / "manual.toml"
    path.write_text(f'data_dir = "{tmp_path / "data"}"\n[database]\nauto_migrate = false\n')
    return path, f"sqlite:///{tmp_path / 'data' / 'farm.db'}"


@pytest.fixture
def farmctl_manual(manual: tuple[Path, str]) -> Callable[..., Result]:
    """farmctl with the auto_migrate-off config."""
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(cli, ["--config", str(manual[0]), *args], env={"FARM_CONFIG": None})

    return run


class TestDbCommands:
    """Status reads the revision; upgrade migrates once."""

    def test_status_of_a_new_database_creates_nothing(
        self, farmctl_manual: Callable[..., Result], tmp_path: Path
    ) -> None:
        """A database never opened is reported as never migrated, and no file appears."""
        result = farmctl_manual("db", "status", "--json")
        assert result.exit_code == 0, result.output
        shown = json.loads(result.stdout)
        assert (shown["current"], shown["head"], shown["up_to_date"]) == (
            None, head_revision(), False)
        assert not (tmp_path / "data" / "farm.db").exists()

    def test_upgrade_then_status(self, farmctl_manual: Callable[..., Result]) -> None:
        """Upgrade migrates from none to head; a second upgrade and status say it is current."""
        first = farmctl_manual("db", "upgrade")
        assert first.exit_code == 0, first.output
        assert f"upgraded from none to {head_revision()}" in first.stdout
        again = farmctl_manual("db", "upgrade")
        assert "already at the newest revision" in again.stdout
        status = farmctl_manual("db", "status")
        assert status.exit_code == 0 and "up to date" in status.stdout


class TestAutoMigrateOff:
    """With auto_migrate off nothing migrates when opened; the error names the command."""

    def test_store_refuses_old_schema(self, store_url: str) -> None:
        """Store(url, auto_migrate=False) on an unmigrated database raises, telling the fix."""
        with pytest.raises(StoreError, match="run 'farmctl db upgrade'"):
            Store(store_url, auto_migrate=False)
        Store(store_url).close()  # migrates
        with Store(store_url, auto_migrate=False) as store:
            assert store.list_jobs() == []

    def test_farmctl_says_run_db_upgrade(self, farmctl_manual: Callable[..., Result]) -> None:
        """farmctl jobs on an unmigrated database: a one-line error and exit 1, no traceback."""
        result = farmctl_manual("jobs")
        assert result.exit_code == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "run 'farmctl db upgrade'" in lines[0]
        assert farmctl_manual("db", "upgrade").exit_code == 0
        assert farmctl_manual("jobs").exit_code == 0
