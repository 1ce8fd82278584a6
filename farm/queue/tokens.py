"""The HTTP API's tokens: created once, stored as SHA-256 digests, checked per request.

A token is ``farm_`` + 32 random bytes (``secrets.token_urlsafe``), shown to
its owner once by ``farmctl token create`` and never stored: the database keeps
its SHA-256 only. A fast unsalted digest is enough here, unlike for passwords:
the token carries 256 bits of randomness, so there is nothing to guess by
brute force or dictionary, and a leaked ``api_tokens`` table gives no usable
token (the reasoning GitHub documents for its token scanning, and what
Django REST framework's ``knox`` does).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from farm.errors import UserFault
from farm.queue.models import ApiToken
from farm.queue.ops import TransactionOps

__all__ = ["TOKEN_PREFIX", "Caller", "TokenError", "TokenInfo", "TokenOps", "token_digest"]

TOKEN_PREFIX = "farm_"  # noqa: S105 (a marker every token starts with, not a secret)
_OWNER_MAX = 128


class TokenError(UserFault):
    """A token operation the user asked for cannot be done (unknown id, bad owner name)."""


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: the owner of its token.

    Attributes:
        owner: the token's owner name.
        operator: whether the token may drain, undrain and release any device.
        token_id: the ``api_tokens`` row.
    """

    owner: str
    operator: bool
    token_id: int


@dataclass(frozen=True)
class TokenInfo:
    """A stored token as ``farmctl token list`` shows it (never the token itself)."""

    id: int
    owner: str
    operator: bool
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def token_digest(token: str) -> str:
    """Hex SHA-256 of a token's UTF-8 bytes: what ``api_tokens.token_sha256`` holds."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _info(row: ApiToken) -> TokenInfo:
    return TokenInfo(row.id, row.owner, row.operator, row.created_at, row.last_used_at,
                     row.revoked_at)


class TokenOps(TransactionOps):
    """Token operations; mixed into Store, which provides ``_tx()``."""

    def create_token(self, owner: str, now: datetime, *, operator: bool = False) -> str:
        """Make a token for ``owner`` and return it; only its digest is stored.

        Raises:
            TokenError: ``owner`` is empty, too long or has control characters.
        """
        owner = owner.strip()
        if not owner or len(owner) > _OWNER_MAX or not owner.isprintable():
            raise TokenError(f"owner must be 1 to {_OWNER_MAX} printable characters: {owner!r}")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._tx() as session:
            session.add(ApiToken(owner=owner, token_sha256=token_digest(token),
                                 operator=operator, created_at=now))
        return token

    def check_token(self, token: str, now: datetime) -> Caller | None:
        """The caller a token belongs to, or None for an unknown or revoked one.

        Marks the token used at ``now`` (at most once a minute, to keep reads cheap).
        """
        if not token.startswith(TOKEN_PREFIX):
            return None
        digest = token_digest(token)
        with self._tx() as session:
            row = session.scalars(
                select(ApiToken).where(ApiToken.token_sha256 == digest)
            ).one_or_none()
            # The lookup is by digest; compare again in constant time all the same.
            if row is None or not hmac.compare_digest(row.token_sha256, digest):
                return None
            if row.revoked_at is not None:
                return None
            if row.last_used_at is None or (now - row.last_used_at).total_seconds() >= 60:
                row.last_used_at = now
            return Caller(row.owner, row.operator, row.id)

    def list_tokens(self) -> list[TokenInfo]:
        """Every token, oldest first."""
        with self._tx() as session:
            return [_info(r) for r in session.scalars(select(ApiToken).order_by(ApiToken.id))]

    def revoke_token(self, token_id: int, now: datetime) -> TokenInfo:
        """Revoke a token by id (idempotent).

        Raises:
            TokenError: no token has this id.
        """
        with self._tx() as session:
            row = session.get(ApiToken, token_id)
            if row is None:
                raise TokenError(f"no token with id {token_id}")
            if row.revoked_at is None:
                row.revoked_at = now
            return _info(row)
