"""API tokens: shown once, stored hashed, checked, revoked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from farm.queue.store import Store
from farm.queue.tokens import TOKEN_PREFIX, TokenError, token_digest

NOW = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


def test_a_token_is_stored_only_as_its_digest(store: Store) -> None:
    token = store.create_token("ana", NOW)
    assert token.startswith(TOKEN_PREFIX) and len(token) > 40
    with store._engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT token_sha256 FROM api_tokens")).scalars().all()
    assert stored == [token_digest(token)]
    assert token not in stored[0]


def test_check_token_names_its_owner_and_rights(store: Store) -> None:
    ana = store.create_token("ana", NOW)
    ops = store.create_token("ops", NOW, operator=True)
    ana_caller, ops_caller = store.check_token(ana, NOW), store.check_token(ops, NOW)
    assert ana_caller is not None and (ana_caller.owner, ana_caller.operator) == ("ana", False)
    assert ops_caller is not None and (ops_caller.owner, ops_caller.operator) == ("ops", True)


@pytest.mark.parametrize("wrong", ["", "farm_", "farm_nope", "Bearer x", "x" * 200])
def test_unknown_tokens_are_refused(store: Store, wrong: str) -> None:
    store.create_token("ana", NOW)
    assert store.check_token(wrong, NOW) is None


def test_a_token_one_character_off_is_refused(store: Store) -> None:
    token = store.create_token("ana", NOW)
    assert store.check_token(token[:-1] + ("A" if token[-1] != "A" else "B"), NOW) is None


def test_revoked_tokens_are_refused_and_listed(store: Store) -> None:
    token = store.create_token("ana", NOW)
    (info,) = store.list_tokens()
    revoked = store.revoke_token(info.id, NOW + timedelta(minutes=1))
    assert revoked.revoked_at == NOW + timedelta(minutes=1)
    assert store.check_token(token, NOW + timedelta(minutes=2)) is None
    with pytest.raises(TokenError, match="no token with id 99"):
        store.revoke_token(99, NOW)


def test_use_is_recorded(store: Store) -> None:
    token = store.create_token("ana", NOW)
    store.check_token(token, NOW + timedelta(minutes=5))
    (info,) = store.list_tokens()
    assert info.last_used_at == NOW + timedelta(minutes=5)


@pytest.mark.parametrize("owner", ["", "   ", "a\nb", "x" * 129])
def test_bad_owner_names_are_refused(store: Store, owner: str) -> None:
    with pytest.raises(TokenError, match="owner must be"):
        store.create_token(owner, NOW)
