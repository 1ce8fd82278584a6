"""Many farmd and farmctl opening one empty database at once migrate it once.

On PostgreSQL (needs ``TEST_POSTGRES_URL``) each test makes its own database
(``CREATE DATABASE``: the migration's advisory lock is per database); on SQLite
a new file, where ``BEGIN IMMEDIATE`` serialises them. Each test starts several
processes, half ``farmctl db upgrade`` (``python -m farm.cli.main``), half
opening a :class:`~farm.queue.Store` as farmd does. Each imports everything
first, says it is ready, then waits for one barrier file, so the migrations
start together.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from farm.clock import wait_until
from farm.queue.db import create_engine, head_revision
from farm.queue.models import Base
from farm.testing import fresh_postgres_database

PROCESSES = 6
DEADLINE_S = 300.0

#: Run in each process: import, say ready, wait for the barrier, then migrate.
_CHILD = """
import sys, time
from pathlib import Path
from farm.cli.main import main
from farm.queue import Store
import farm.queue.migrations.versions  # noqa: F401 - loaded before the barrier
how, ready, go, url = sys.argv[1:5]
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.002)
if how == "store":
    Store(url).close()
else:
    main(["db", "upgrade"])
"""


@pytest.fixture(params=["postgresql", "sqlite"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a new, empty database (PostgreSQL: made here and dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared' / 'farm.db'}"
        return
    base: str = request.getfixturevalue("postgres_base_url")
    with fresh_postgres_database(base, "farm_race_") as url:
        yield url


class TestMigrateRace:
    """Concurrent first starts on an empty database."""

    def test_concurrent_openers_migrate_once(self, empty_database: str, tmp_path: Path) -> None:
        """All succeed; alembic_version holds the head once; every table of the models exists."""
        go = tmp_path / "go"
        env = {**os.environ, "FARM_DATABASE_URL": empty_database,
               "FARM_DATA_DIR": str(tmp_path / "data"), "FARM_CONFIG": str(tmp_path / "none.toml")}
        (tmp_path / "none.toml").write_text("")
        children = []
        for index in range(PROCESSES):
            how = "store" if index % 2 else "cli"
            argv = [sys.executable, "-c", _CHILD, how, str(tmp_path / f"ready-{index}"), str(go),
                    empty_database]
            children.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT))
        try:
            wait_until(lambda: all((tmp_path / f"ready-{i}").exists() for i in range(PROCESSES)),
                       DEADLINE_S, "every process ready", interval_s=0.01)
            go.touch()
            outputs = [child.communicate(timeout=DEADLINE_S)[0].decode() for child in children]
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
        failed = [(c.returncode, out) for c, out in zip(children, outputs, strict=True)
                  if c.returncode != 0]
        assert failed == []
        upgraded = [out for out in outputs if "upgraded from none to" in out]
        already = [out for out in outputs if "already at the newest revision" in out]
        assert len(upgraded) <= 1 and len(upgraded) + len(already) == PROCESSES // 2
        engine = sa.create_engine(empty_database)
        try:
            with engine.connect() as connection:
                versions = connection.exec_driver_sql(
                    "SELECT version_num FROM alembic_version").scalars().all()
                tables = set(sa.inspect(connection).get_table_names())
        finally:
            engine.dispose()
        assert versions == [head_revision()]
        assert set(Base.metadata.tables) <= tables


def test_wal_switch_waits_for_a_writer(tmp_path: Path) -> None:
    """An opener of a file still in rollback mode, while another holds its write lock, waits.

    SQLite answers ``journal_mode = WAL`` "database is locked" at once here
    (waiting could deadlock, so the busy handler is skipped); the opener retries
    until the writer commits. CI saw it once in six processes opening one file.
    """
    path = tmp_path / "farm.db"
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("CREATE TABLE t (x)")
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO t VALUES (1)")
        engine = create_engine(f"sqlite:///{path}")
        modes: list[str] = []

        def open_it() -> None:
            with engine.connect() as connection:
                modes.append(connection.exec_driver_sql("PRAGMA journal_mode").scalar_one())

        opener = threading.Thread(target=open_it)
        opener.start()
        try:
            opener.join(0.3)
            assert opener.is_alive(), "the opener should wait for the writer's lock"
        finally:
            writer.execute("COMMIT")
            opener.join(DEADLINE_S)
        assert modes == ["wal"]
        engine.dispose()
    finally:
        writer.close()
