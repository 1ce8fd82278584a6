"""Readers for the board fixtures in tests/fixtures/boards (and the arm64 ones in android/)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def board_fixture() -> Callable[[str], bytes]:
    """A board fixture's bytes by name, exactly as captured."""
    return lambda name: (FIXTURES / "boards" / name).read_bytes()


@pytest.fixture
def android_fixture() -> Callable[[str], str]:
    """An Android capture's text by name (arm64 kernel files a board's kernel prints alike)."""
    return lambda name: (FIXTURES / "android" / name).read_text(encoding="utf-8")
