"""Fixtures for every test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import structlog

from farm import composition
from farm.config import ENV_PATH, ENV_PREFIX

# The registries (job kinds, controllers, readings), as farmd and farmctl install them.
composition.install()


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """Undo any ``farm.logs.configure()`` a test ran (farmctl in CliRunner does).

    A level filter left behind would drop the events later tests check with
    ``structlog.testing.capture_logs``.
    """
    yield
    structlog.reset_defaults()


@pytest.fixture(autouse=True)
def _no_farm_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide the caller's ``FARM_...`` variables from every test.

    farm's config refuses unknown ``FARM_`` settings and applies known ones, so
    a developer's ``FARM_ADB__PORT`` (or a CI variable under that prefix) would
    otherwise change what farmctl, farmd and their children see in a test.
    """
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX) or name == ENV_PATH:
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def postgres_base_url() -> str:
    """``$TEST_POSTGRES_URL`` (a server whose user may create databases and schemas).

    The one place a PostgreSQL test is skipped: ``.ci/run`` starts a throwaway
    server and sets the variable, so CI runs every such test.
    """
    url = os.environ.get("TEST_POSTGRES_URL")
    if not url:
        pytest.skip("TEST_POSTGRES_URL is not set")
    return url
