"""The bases of Store's facades (:mod:`farm.queue.job_ops`, :mod:`farm.queue.devices`...)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager

from sqlalchemy.orm import Session

__all__ = ["JobTransactionOps", "TransactionOps"]


class TransactionOps(ABC):
    """Operations that run in :class:`~farm.queue.store.Store`'s transactions."""

    @abstractmethod
    def _tx(self) -> AbstractContextManager[Session]:
        """One transaction (``Store._tx``: SQLAlchemy errors become StoreError)."""


class JobTransactionOps(TransactionOps):
    """Operations on jobs, whose transactions also wake the farmd hosts that listen."""

    @abstractmethod
    def _notify_jobs(self, session: Session) -> None:
        """``NOTIFY farm_jobs`` when ``session``'s transaction commits (``Store._notify_jobs``)."""
