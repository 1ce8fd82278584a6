"""``farmctl doctor``'s database check: it reads the schema revision and never migrates."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from farm.cli.doctor import Status, check_database, run_checks
from farm.cli.main import cli
from farm.config import Settings
from farm.queue import Store
from farm.queue.db import create_engine, revisions
from farm.virtual.testing import free_port


def _settings(tmp_path: Path) -> Settings:
    """Settings whose adb server and tracker ports answer nothing (those checks fail fast)."""
    return Settings(data_dir=tmp_path / "data", adb={"port": free_port()},
                    tracker={"port": free_port()}, metrics={"port": free_port()})


def _revision(url: str) -> str | None:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return revisions(connection)[0]
    finally:
        engine.dispose()


@pytest.fixture
def unmigrated(tmp_path: Path) -> Settings:
    """Settings naming an existing SQLite file that was never migrated (no alembic_version)."""
    settings = _settings(tmp_path)
    (tmp_path / "data").mkdir()
    sqlite3.connect(tmp_path / "data" / "farm.db").close()
    return settings


class TestDoctorDatabase:
    def test_unmigrated_database_warns_and_stays_unmigrated(self, unmigrated: Settings) -> None:
        """An old schema warns with how to migrate; doctor's whole run leaves it as it was."""
        checks = {c.name: c for c in run_checks(unmigrated, farmd_running=False, env={})}
        database = checks["database"]
        assert database.status is Status.WARN
        assert "never migrated" in database.detail
        assert "opening migrates it" in database.fix
        assert "ABIs unknown" in checks["ndk"].detail
        assert _revision(unmigrated.database_url) is None

    def test_older_revision_warns_and_is_left_alone(self, tmp_path: Path) -> None:
        """A database stamped with an older revision warns, naming both revisions."""
        settings = _settings(tmp_path)
        Store(settings.database_url).close()
        with sqlite3.connect(settings.data_dir / "farm.db") as connection:
            connection.execute("UPDATE alembic_version SET version_num = '0000_older'")
        check, abis = check_database(settings)
        assert check.status is Status.WARN
        assert "at revision 0000_older" in check.detail
        assert "opening migrates it" in check.fix
        assert abis is None
        assert _revision(settings.database_url) == "0000_older"

    def test_current_database_gives_the_phones_abis(self, tmp_path: Path) -> None:
        """At the newest schema the check is ok and each phone's ABI is read from its facts."""
        settings = _settings(tmp_path)
        with Store(settings.database_url) as store:
            now = datetime(2025, 1, 1, tzinfo=UTC)
            store.upsert_device("A1", now, {"abi": "arm64-v8a"})
            store.upsert_device("B2", now, {"abis": ["x86_64", "x86"]})
            store.upsert_device("C3", now, {})
        check, abis = check_database(settings)
        assert check.status is Status.OK
        assert abis == {"A1": "arm64-v8a", "B2": "x86_64"}

    def test_missing_database_is_not_created(self, tmp_path: Path) -> None:
        """No database yet: a warning, no phone known, and no file appears."""
        settings = _settings(tmp_path)
        check, abis = check_database(settings)
        assert check.status is Status.WARN
        assert abis == {}
        assert not (settings.data_dir / "farm.db").exists()

    def test_farmctl_doctor_prints_the_warning_and_does_not_migrate(
        self, unmigrated: Settings
    ) -> None:
        """The command's table names the old schema, and the database is still unmigrated."""
        config = unmigrated.data_dir.parent / "farm.toml"
        config.write_text(
            f'data_dir = "{unmigrated.data_dir}"\n[adb]\nport = {unmigrated.adb.port}\n'
            f"[tracker]\nport = {unmigrated.tracker.port}\n[metrics]\nport = {free_port()}\n",
            encoding="utf-8")
        result = CliRunner().invoke(cli, ["--config", str(config), "doctor"],
                                    env={"FARM_CONFIG": None})
        assert result.exit_code == 1, result.output  # no adb server
        assert "never migrated" in result.stdout
        assert _revision(unmigrated.database_url) is None

    def test_doctor_under_server_says_it_checks_this_host(self, unmigrated: Settings) -> None:
        """With --server doctor says first that it checks this host, not the server, then does."""
        config = unmigrated.data_dir.parent / "farm.toml"
        config.write_text(
            f'data_dir = "{unmigrated.data_dir}"\n[adb]\nport = {unmigrated.adb.port}\n'
            f"[tracker]\nport = {unmigrated.tracker.port}\n[metrics]\nport = {free_port()}\n",
            encoding="utf-8")
        url = f"http://127.0.0.1:{free_port()}"
        result = CliRunner().invoke(cli, ["--config", str(config), "--server", url, "doctor",
                                          "--json"], env={"FARM_CONFIG": None})
        assert result.stderr.splitlines()[0] == (
            f"note: doctor checks this host and its config, not the farm server {url} "
            "(--server or FARM_SERVER); run it on the farm host to check that")
        checks = {c["name"]: c for c in json.loads(result.stdout)}
        assert "never migrated" in checks["database"]["detail"]  # this host's database
