"""Fixtures for unit tests that need a store: a fresh real database per test (rq's RQTestCase).

SQLite always, in a file under tmp_path. PostgreSQL too when
``TEST_POSTGRES_URL`` is set (e.g. ``postgresql+psycopg://farm@127.0.0.1/farm``):
each test gets its own schema, dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from farm.queue import Store


def _postgres_url(base: str, schema: str) -> str:
    url = sa.engine.make_url(base)
    return url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
        hide_password=False
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'farm.db'}"
        return
    base: str = request.getfixturevalue("postgres_base_url")
    schema = f"farm_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base)
    with admin.begin() as connection:
        connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield _postgres_url(base, schema)
    finally:
        with admin.begin() as connection:
            connection.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open Store on an empty, migrated database."""
    with Store(store_url) as opened:
        yield opened
