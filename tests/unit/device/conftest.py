"""Shared helpers for the parser tests: the real phone captures in tests/fixtures/android."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "android"


def read_fixture(name: str) -> str:
    """Return a fixture file's text exactly as stored."""
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture
def fixture_text():
    """Give tests a reader for fixture files by name."""
    return read_fixture
