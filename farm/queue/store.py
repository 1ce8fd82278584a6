"""The durable queue: jobs, attempts under leases, results exactly once.

Every method is one transaction and takes the time as ``now`` (aware UTC); none
reads a clock, so tests jump ahead instead of sleeping (rq's
``registry.cleanup(timestamp)`` works the same way). The life of a job::

    enqueue ──> queued ──claim──> running ──finish──> succeeded (one Result)
                  ^                  │ fail_attempt / reap (lease expired)
                  └──── retry ───────┤
                                     └──> failed        cancel: queued|running -> cancelled

Claims are atomic: rows are locked (``FOR UPDATE SKIP LOCKED`` on PostgreSQL;
SQLite's single writer under ``BEGIN IMMEDIATE``) and re-checked before they
change, so two farmd hosts sharing one PostgreSQL queue cannot start one job
twice or put two jobs on one phone.

``Store`` owns the engine and the transaction (``_tx``, with the commit's
``NOTIFY``); each aggregate's operations are a facade over that one
transaction, in its own module, and ``Store`` composes them, so
``store.enqueue(...)``, ``store.upsert_device(...)`` and the rest are called
on the store: jobs (:mod:`farm.queue.job_ops`), attempts and their leases
(:mod:`farm.queue.attempt_ops`, the retry policy in :mod:`farm.queue.lifecycle`),
results (:mod:`farm.queue.result_ops`), devices (:mod:`farm.queue.devices`) and
their health samples (:mod:`farm.queue.health_samples`),
hosts (:mod:`farm.queue.hosts`), tokens (:mod:`farm.queue.tokens`), blobs,
reservations, regressions and the tuning rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Self

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from farm import logs
from farm.errors import StoreError
from farm.queue import head, transitions
from farm.queue.attempt_ops import AttemptOps
from farm.queue.blobs import BlobOps
from farm.queue.db import JOBS_CHANNEL, create_engine, migrate, require_head
from farm.queue.devices import DeviceOps
from farm.queue.health_samples import HealthSampleOps
from farm.queue.helpers import HelperOps
from farm.queue.hosts import HostOps
from farm.queue.job_ops import JobOps
from farm.queue.regressions import RegressionOps
from farm.queue.reservations import ReservationOps
from farm.queue.result_ops import ResultOps
from farm.queue.task_work import TaskWorkOps
from farm.queue.tokens import TokenOps
from farm.queue.tuning import TuningRecordOps

__all__ = ["Store"]

log = logs.get_logger(__name__)


class Store(JobOps, AttemptOps, ResultOps, DeviceOps, HealthSampleOps, HostOps, BlobOps,
            ReservationOps, RegressionOps, TokenOps, TuningRecordOps, TaskWorkOps, HelperOps):
    """The queue database; migrated to the newest schema when opened.

    Args:
        url: a SQLAlchemy URL, e.g. ``farm.queue.db.default_url(data_dir)``
            (SQLite) or ``postgresql+psycopg://user@host/farm``.
        auto_migrate: migrate when opened (:func:`farm.queue.db.migrate`, once
            across concurrent openers); False only checks that the schema is at
            the newest revision (``[database] auto_migrate``; ``farmctl db
            upgrade`` migrates).

    Every method is one transaction, and every method raises
    :class:`~farm.errors.StoreError` when the database refuses it (locked past
    the busy timeout, connection lost); SQLAlchemy's own errors never escape.
    Methods that change a row log one line per change after the commit.

    Raises:
        StoreError: the database cannot be opened or migrated; with
            ``auto_migrate`` off, its schema is not the newest.
    """

    def __init__(self, url: str, *, auto_migrate: bool = True) -> None:
        self.url = url
        self._engine = create_engine(url)
        try:
            (migrate if auto_migrate else require_head)(self._engine)
        except StoreError:
            self._engine.dispose()
            raise
        self._sessions = sessionmaker(self._engine, expire_on_commit=False)
        self._specs = head.DecodedSpecs()

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        """One transaction; SQLAlchemy errors become StoreError at this boundary."""
        try:
            with self._sessions() as session:
                with session.begin():
                    yield session
                for event, fields in transitions.noted(session):
                    log.info(event, **fields)
        except IntegrityError:
            raise  # callers decide: a unique constraint is how "exactly once" is kept
        except SQLAlchemyError as exc:
            raise StoreError(f"database error: {exc}") from exc

    def _notify_jobs(self, session: Session) -> None:
        """On PostgreSQL, ``NOTIFY farm_jobs`` at this transaction's commit.

        Delivered to every listening farmd (a job to start, phones freed) and
        ``farmctl wait`` (a job may have ended), on any host (farm.runner.wake);
        a rolled-back transaction sends nothing (PostgreSQL docs, "NOTIFY").
        """
        if self._engine.dialect.name == "postgresql":
            session.execute(text(f"NOTIFY {JOBS_CHANNEL}"))
