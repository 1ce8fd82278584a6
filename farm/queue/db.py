"""Opening the queue database: engine settings per backend, and migrations.

SQLite is the default (one file under the data folder); a PostgreSQL URL works
the same. SQLite settings, each for a reason:

* ``journal_mode=WAL``: readers (``farmctl jobs``) never block the writer (farmd).
  Entering it needs the file's exclusive lock, and SQLite reports that lock busy
  without waiting when waiting could deadlock, so several openers of a new file
  retry it (:func:`_enter_wal`) until ``busy_timeout`` has passed.
* ``busy_timeout``: a writer waits for the lock instead of failing at once.
* ``synchronous=FULL``: a committed enqueue survives a power cut, not only a crash.
* ``foreign_keys=ON``: SQLite enforces them only when asked.
* ``BEGIN IMMEDIATE`` for every transaction: the write lock is taken at the start,
  so a claim's reads and writes are one atomic step and two writers never
  deadlock upgrading read locks. pysqlite's own transaction handling is turned
  off to make that possible (SQLAlchemy docs, "Serializable isolation /
  Savepoints / Transactional DDL" for pysqlite).

Migrations run once however many farmd and farmctl open an empty database
together: :func:`migrate` takes PostgreSQL's transaction advisory lock
:data:`MIGRATION_LOCK_KEY` (SQLite: its ``BEGIN IMMEDIATE`` write lock) before it
reads the revision, so the first opener upgrades and the others wait, then find
the head revision and do nothing. With ``[database] auto_migrate = false`` the
store only checks the revision (:func:`require_head`) and ``farmctl db upgrade``
migrates.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from farm import logs
from farm.clock import SystemClock, wait_until
from farm.config import HostSettings, default_database_url
from farm.errors import StoreError, StoreUnreachable

if TYPE_CHECKING:
    from alembic.config import Config

log = logs.get_logger(__name__)

__all__ = ["JOBS_CHANNEL", "MIGRATION_LOCK_KEY", "alembic_head_revision", "create_engine",
           "default_url", "head_revision", "migrate", "require_head", "revisions"]

SQLITE_BUSY_TIMEOUT_MS = 30_000
#: Pause between tries of ``PRAGMA journal_mode = WAL`` on a locked new file.
_WAL_RETRY_S = 0.01
#: PostgreSQL channel an enqueue NOTIFYs in its transaction (farm.runner.wake listens).
JOBS_CHANNEL = "farm_jobs"
#: PostgreSQL advisory lock key held (``pg_advisory_xact_lock``) while :func:`migrate`
#: reads and upgrades the schema: ``int.from_bytes(b"farmmig!")``, a bigint no
#: other farm lock uses. Advisory locks are per database, so farm databases on
#: one server do not wait for each other.
MIGRATION_LOCK_KEY = 0x6661726D6D696721
_MIGRATIONS = Path(__file__).with_name("migrations")
_ALEMBIC_LOCK = threading.Lock()
#: ``hosts.dead_after_s``'s default, for openers without settings.
HOST_DEAD_AFTER_S = HostSettings().dead_after_s


def default_url(data_dir: str | os.PathLike[str]) -> str:
    """The SQLite URL of the queue under ``data_dir`` (created if missing).

    Raises:
        StoreError: the folder cannot be created.
    """
    path = Path(data_dir).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create data folder {path}: {exc}") from exc
    return default_database_url(path.resolve())


def create_engine(url: str) -> sa.Engine:
    """An engine with the settings above for SQLite, plain for PostgreSQL.

    A SQLite file's folder is created if missing.

    Raises:
        StoreError: the URL is malformed or names a driver that is not installed.
    """
    try:
        engine = sa.create_engine(url, future=True)
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise StoreError(f"cannot open {url!r}: {exc}") from exc
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        if database and database != ":memory:" and not database.startswith("file:"):
            try:
                Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of {database}: {exc}") from exc
        _configure_sqlite(engine)
    return engine


def _configure_sqlite(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        _enter_wal(cursor)
        cursor.execute("PRAGMA synchronous = FULL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _enter_wal(cursor: Any) -> None:
    """``PRAGMA journal_mode = WAL``, retried while another connection holds the lock.

    The switch needs an exclusive lock. When a second opener holds a read lock
    and waits for its write lock (``BEGIN IMMEDIATE`` in :func:`migrate`),
    SQLite answers SQLITE_BUSY at once instead of calling the busy handler,
    which could deadlock (sqlite.org/c3ref/busy_handler.html). Six processes
    opening one new file hit it (CI, test_queue_migrate_race); once the file
    is in WAL mode the pragma changes nothing and takes no lock.

    Raises:
        sqlite3.OperationalError: still locked after ``SQLITE_BUSY_TIMEOUT_MS``,
            or any other failure at once.
    """
    locked: list[sqlite3.OperationalError] = []

    def entered() -> bool:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as exc:
            # The primary code: SQLITE_BUSY_RECOVERY and the like are busy too.
            if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            locked.append(exc)
            return False
        return True

    if not wait_until(entered, SQLITE_BUSY_TIMEOUT_MS / 1000, interval_s=_WAL_RETRY_S):
        raise locked[-1]


def _alembic_config() -> Config:
    """Alembic settings for our migrations folder (no alembic.ini, see migrations/env.py)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    return config


def revisions(connection: sa.Connection) -> tuple[str | None, str]:
    """The schema revision of ``connection``'s database, and the newest one; changes nothing.

    Returns:
        ``(current, head)``: ``current`` is None for a database never migrated
        (no ``alembic_version`` table); the schema is up to date when they are equal.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database cannot be read.
    """
    return _stored_revision(connection), head_revision()


def _stored_revision(connection: sa.Connection) -> str | None:
    """The revision in ``alembic_version``, read with one SELECT (alembic loads only if odd).

    Alembic's ``MigrationContext`` reads the same row; importing alembic costs
    every farmctl command about 0.1 s, so the one-row case is read here.
    """
    if not sa.inspect(connection).has_table("alembic_version"):
        return None
    rows = connection.execute(sa.text("SELECT version_num FROM alembic_version")).all()
    if len(rows) == 1:
        return str(rows[0][0])
    from alembic.migration import MigrationContext  # several heads: alembic's own rules

    return MigrationContext.configure(connection).get_current_revision()


#: ``revision = "0004"`` and ``down_revision = "0003"`` (or None) in a migration file.
_REVISION_LINE = re.compile(r'^(down_revision|revision)\s*(?::[^=]*)?=\s*(?:"([^"]*)"|None)',
                            re.MULTILINE)


def head_revision() -> str:
    """The newest schema revision this farm's migrations make, e.g. ``"0004"``.

    Read from the migration files' ``revision``/``down_revision`` lines: the
    one revision no file revises. When that is not exactly one (a branch, a
    file written another way) alembic's ``ScriptDirectory`` decides; a unit
    test checks that both agree on the shipped migrations.
    """
    head = _head_from_files()
    if head is not None:
        return head
    return alembic_head_revision()


def _head_from_files() -> str | None:
    made: set[str] = set()
    revised: set[str] = set()
    for path in (_MIGRATIONS / "versions").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        fields = {m.group(1): m.group(2) for m in _REVISION_LINE.finditer(text)}
        if fields.get("revision"):
            made.add(fields["revision"])
            if fields.get("down_revision"):
                revised.add(str(fields["down_revision"]))
    heads = made - revised
    return heads.pop() if len(heads) == 1 else None


def alembic_head_revision() -> str:
    """The head revision as alembic's ``ScriptDirectory`` computes it (slower: imports alembic)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    if head is None:  # a broken install, not a database fault
        raise RuntimeError(f"no migration in {_MIGRATIONS}")
    return head


def migrate(engine: sa.Engine, *, dead_after_s: float = HOST_DEAD_AFTER_S) -> str:
    """Bring the schema to the newest revision, once, in one transaction.

    Concurrent openers (any number of farmd and farmctl, on any hosts) are
    serialised before the revision is read: on PostgreSQL by the transaction
    advisory lock :data:`MIGRATION_LOCK_KEY` (released at commit or rollback,
    also when a process dies holding it); on SQLite by ``BEGIN IMMEDIATE``'s
    write lock. The first upgrades; the others wait, then read the head revision
    and do nothing. Within a process a lock serialises them too: alembic's
    ``context`` and ``op`` are module globals, so two threads upgrading at once
    break each other.

    A pending migration that older farm code cannot read waits until no live
    host runs such code (:mod:`farm.queue.upgrade_guard`).

    Args:
        engine: the database.
        dead_after_s: a host silent this long is gone (``hosts.dead_after_s``).

    Returns:
        The revision the database was at before (``"none"`` if never migrated),
        for ``farmctl db upgrade`` to report.

    Raises:
        StoreUnreachable: no connection could be made (see :func:`_connected`).
        StoreError: the database refused the migration, live older hosts
            could not read it, or a newer farm migrated it past this farm's
            head (before, alembic's traceback for the unknown revision).
    """
    try:
        with _ALEMBIC_LOCK, _connected(engine) as connection, connection.begin():
            if connection.dialect.name == "postgresql":
                connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"),
                                   {"key": MIGRATION_LOCK_KEY})
            current, head = revisions(connection)
            if current is not None and current != head and not _is_known(current):
                raise StoreError(_newer(engine, current, head))
            if current != head:
                from alembic import command
                from alembic.script import ScriptDirectory

                from farm.queue import upgrade_guard

                config = _alembic_config()
                why = upgrade_guard.refusal(connection, ScriptDirectory.from_config(config),
                                            current, head, SystemClock().now(), dead_after_s)
                if why is not None:
                    raise StoreError(f"cannot migrate {_shown(engine)}: {why}")
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                log.info("schema_migrated", from_revision=current or "none", to_revision=head)
            return current or "none"
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot migrate {_shown(engine)}: {exc}") from exc


def require_head(engine: sa.Engine) -> None:
    """Check that the schema is at the newest revision, changing nothing.

    What a store opened with ``auto_migrate`` off does instead of :func:`migrate`.

    Raises:
        StoreUnreachable: no connection could be made (see :func:`_connected`).
        StoreError: the schema is older (or never migrated), naming ``farmctl db
            upgrade``; newer than this farm knows; or the database cannot be read.
    """
    try:
        with _connected(engine) as connection:
            current, head = revisions(connection)
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read the schema revision of {_shown(engine)}: {exc}") from exc
    if current == head:
        return
    if current is not None and not _is_known(current):
        raise StoreError(_newer(engine, current, head))
    found = f"at revision {current}" if current else "never migrated"
    raise StoreError(f"{_shown(engine)} is {found}, newest is {head} and "
                     "database.auto_migrate is off: run 'farmctl db upgrade'")


@contextmanager
def _connected(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection of ``engine``; a server that cannot be reached is :class:`StoreUnreachable`.

    Only a database server is told apart: SQLite opens a local file (its folder
    made by :func:`create_engine`), and its errors at connect, such as a lock,
    stay what they are. Before, a server down while a store opened read
    "cannot migrate ...", as if the schema were at fault.
    """
    try:
        connection = engine.connect()
    except sa.exc.OperationalError as exc:
        if engine.dialect.name == "sqlite":
            raise
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise StoreUnreachable(f"database {_shown(engine)} is unreachable: {reason}") from exc
    with connection:
        yield connection


def _newer(engine: sa.Engine, current: str, head: str) -> str:
    """The error for a database a newer farm migrated past this farm's ``head``."""
    return (f"{_shown(engine)} is at revision {current}, newer than this farm's {head}: "
            "upgrade farm on this host")


def _is_known(revision: str) -> bool:
    from alembic.script import ScriptDirectory

    try:
        return ScriptDirectory.from_config(_alembic_config()).get_revision(revision) is not None
    except Exception:  # noqa: BLE001 - alembic raises several kinds for an unknown id
        return False


def _shown(engine: sa.Engine) -> str:
    """The engine's URL without its password, for messages."""
    return engine.url.render_as_string(hide_password=True)
