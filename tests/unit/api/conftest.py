"""The API tests' fixtures: the app over a fresh store, tokens of two owners and an operator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api_helpers import T0, Api
from fastapi.testclient import TestClient

from farm.api.context import ApiContext
from farm.clock import FakeClock
from farm.config import Settings
from farm.queue import Store
from farm.serve.app import create_app


@pytest.fixture
def api(store: Store, tmp_path: Path) -> Iterator[Api]:
    """The API over an empty store; alice and bob hold plain tokens, ops an operator one."""
    clock = FakeClock(T0)
    wakes: list[int] = []
    settings = Settings(data_dir=tmp_path, database_url=store.url)
    ctx = ApiContext(store, settings, clock, wake=lambda: wakes.append(1))
    tokens = [store.create_token(owner, T0, operator=owner == "ops")
              for owner in ("alice", "bob", "ops")]
    with TestClient(create_app(ctx)) as client:
        yield Api(client, store, clock, wakes, *tokens)
