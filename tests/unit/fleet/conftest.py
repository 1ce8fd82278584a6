"""Fixtures for the fleet's unit tests: a fleet manager without phones.

The real store it runs on (SQLite, and PostgreSQL when ``TEST_POSTGRES_URL`` is
set) comes from ``tests/unit/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from farm.clock import FakeClock
from farm.config import Settings
from farm.controllers.android import AndroidController
from farm.fleet.manager import FleetManager, FleetOptions
from farm.queue import Store


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
        options = FleetOptions.from_settings(settings)
        return FleetManager(options, AndroidController(options), store, clock)

    return make
