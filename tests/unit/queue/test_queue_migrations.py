"""Tests of farm.queue.db: migrations match the models, SQLite settings hold."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from farm.errors import StoreError
from farm.queue import Store, default_url
from farm.queue.db import (
    alembic_head_revision,
    create_engine,
    head_revision,
    migrate,
    revisions,
)
from farm.queue.models import Base


class TestMigrations:
    """The alembic history builds exactly the schema models.py declares."""

    def test_migrated_schema_matches_models(self, store_url: str) -> None:
        """Autogenerate finds no difference between the migrated database and the models."""
        engine = create_engine(store_url)
        migrate(engine)
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
        engine.dispose()

    def test_head_from_files_is_alembics(self) -> None:
        """The head read from the migration files (farmctl's fast path) is alembic's head."""
        assert head_revision() == alembic_head_revision()

    def test_current_revision_without_alembic_is_alembics(self, store_url: str) -> None:
        """The stored revision read with one SELECT is what alembic's MigrationContext reads."""
        engine = create_engine(store_url)
        with engine.connect() as connection:
            assert revisions(connection)[0] is None
        migrate(engine)
        with engine.connect() as connection:
            assert revisions(connection)[0] == (
                MigrationContext.configure(connection).get_current_revision())
        engine.dispose()

    def test_readings_of_older_rows_are_carried_into_the_json(self, store_url: str) -> None:
        """0009 copies each sample's per-reading columns into readings, leaving NULLs out."""
        from alembic import command

        from farm.queue.db import _alembic_config

        engine = create_engine(store_url)
        config = _alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0007")
            connection.execute(sa.text(
                "INSERT INTO health_samples (serial, at, battery_pct, thermal_status, screen_on) "
                "VALUES ('p1', '2026-11-26 18:00:00', 81.0, 1, true)"))
        migrate(engine)
        with Store(store_url) as store:
            (sample,) = store.health_samples("p1")
        engine.dispose()
        assert sample["readings"] == {"battery_pct": 81.0, "thermal_status": 1}
        assert sample["screen_on"] is True

    def test_migrate_twice_is_harmless(self, store_url: str) -> None:
        """Opening the store again (farmd, then farmctl) finds the schema current."""
        Store(store_url).close()
        with Store(store_url) as again:
            assert again.list_jobs() == []

    def test_a_database_a_newer_farm_migrated_is_one_line(self, store_url: str) -> None:
        """A revision this farm's files lack: a StoreError naming both revisions, no traceback."""
        engine = create_engine(store_url)
        migrate(engine)
        with engine.begin() as connection:
            connection.execute(sa.text("UPDATE alembic_version SET version_num = '0999'"))
        with pytest.raises(StoreError, match=r"revision 0999, newer than this farm's 0\d+: "
                                             r"upgrade farm on this host"):
            migrate(engine)
        engine.dispose()


class TestSqliteSettings:
    """The default SQLite database lives under the data folder with WAL on."""

    def test_default_url_under_data_dir(self, tmp_path: Path) -> None:
        """default_url makes the data folder and names farm.db in it, in WAL mode once opened."""
        url = default_url(tmp_path / "data")
        assert url == f"sqlite:///{tmp_path / 'data' / 'farm.db'}"
        with Store(url) as store, store._engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
        assert (tmp_path / "data" / "farm.db").is_file()

    def test_bad_url_is_a_store_error(self) -> None:
        """An unusable URL raises StoreError, not a SQLAlchemy traceback."""
        with pytest.raises(StoreError):
            Store("nosuchdialect://x/y")

    def test_unwritable_database_is_a_store_error(self, tmp_path: Path) -> None:
        """A database path that cannot be created raises StoreError."""
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        with pytest.raises(StoreError):
            Store(f"sqlite:///{blocker / 'sub' / 'farm.db'}")

    def test_naive_datetime_refused(self, tmp_path: Path) -> None:
        """Passing a naive datetime is a caller bug and is refused, not stored with a guessed
        zone."""
        with (
            Store(default_url(tmp_path)) as store,
            pytest.raises(StoreError, match="naive datetime"),
        ):
            store.upsert_device("a", datetime(2025, 1, 1))  # noqa: DTZ001 - refused input
