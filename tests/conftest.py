"""Fixtures for every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """Undo any ``farm.logs.configure()`` a test ran (farmctl in CliRunner does).

    A level filter left behind would drop the events later tests check with
    ``structlog.testing.capture_logs``.
    """
    yield
    structlog.reset_defaults()
