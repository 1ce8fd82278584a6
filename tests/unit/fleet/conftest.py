"""Fixtures for the fleet's unit tests: a real store (SQLite, and PostgreSQL when
``TEST_POSTGRES_URL`` is set) and a fleet manager on it without phones.

The store fixtures follow ``tests/unit/queue/conftest.py`` (a schema per test on
PostgreSQL, dropped afterwards).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest
import sqlalchemy as sa

from farm.adb import Adb
from farm.aio import LoopThread
from farm.clock import FakeClock
from farm.config import Settings
from farm.fleet.manager import FleetManager, FleetOptions
from farm.queue import Store


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'farm.db'}"
        return
    base = os.environ.get("TEST_POSTGRES_URL")
    if not base:
        pytest.skip("TEST_POSTGRES_URL is not set")
    schema = f"farm_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base)
    with admin.begin() as connection:
        connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        url = sa.engine.make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open Store on an empty, migrated database."""
    with Store(store_url) as opened:
        yield opened


@pytest.fixture
def clock() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()


@pytest.fixture
def make_manager(tmp_path: Path) -> Callable[..., FleetManager]:
    """Factory: ``make_manager(store, clock, **supervise)`` -> a fleet manager without phones.

    Its options come from the config (with ``[supervise]`` changes); it has no
    adb and no event loop, so only the parts that need no phone are called on
    it (decisions, store writes, the ladder's quarantine).
    """
    def make(store: Store, clock: FakeClock, **supervise: float) -> FleetManager:
        settings = Settings.model_validate({"data_dir": str(tmp_path), "supervise": supervise})
        return FleetManager(FleetOptions.from_settings(settings), cast(Adb, None), store, clock,
                            cast(LoopThread, None))

    return make
