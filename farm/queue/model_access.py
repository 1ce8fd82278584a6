"""The tables of what callers bring: the HTTP API's hashed tokens and job inputs by SHA-256."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from farm.queue.model_base import Base


class ApiToken(Base):
    """An HTTP API token; only its SHA-256 is stored, never the token."""

    __tablename__ = "api_tokens"
    __table_args__ = (sa.UniqueConstraint("token_sha256", name="uq_api_tokens_token_sha256"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str] = mapped_column(sa.String(128))
    token_sha256: Mapped[str] = mapped_column(sa.String(64))
    # Operators may drain, undrain and release any device.
    operator: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)


class Blob(Base):
    """A job input (a model file) by the SHA-256 of its bytes; never changed once written."""

    __tablename__ = "blobs"

    sha256: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    size: Mapped[int] = mapped_column(sa.BigInteger)
    data: Mapped[bytes] = mapped_column(sa.LargeBinary)
    created_at: Mapped[datetime]
