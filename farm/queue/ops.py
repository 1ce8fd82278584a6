"""The base of Store's mixins (:mod:`farm.queue.devices`, :mod:`farm.queue.regressions`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager

from sqlalchemy.orm import Session

__all__ = ["TransactionOps"]


class TransactionOps(ABC):
    """Operations that run in :class:`~farm.queue.store.Store`'s transactions."""

    @abstractmethod
    def _tx(self) -> AbstractContextManager[Session]:
        """One transaction (``Store._tx``: SQLAlchemy errors become StoreError)."""
