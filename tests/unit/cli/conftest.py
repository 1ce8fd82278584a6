"""Fixtures for the farmctl tests: a config in a temporary folder, farmctl run in-process
(click's CliRunner), and the queue it uses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from farm.cli.main import cli
from farm.queue import Store


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A farm.toml whose data folder is in tmp_path."""
    path = tmp_path / "farm.toml"
    path.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    return path


@pytest.fixture
def farmctl(config: Path) -> Callable[..., Result]:
    """Run farmctl with the test config; returns the click Result."""
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(cli, ["--config", str(config), *args], env={"FARM_CONFIG": None})

    return run


@pytest.fixture
def store(config: Path) -> Iterator[Store]:
    """The same queue farmctl uses, opened by the test."""
    with Store(f"sqlite:///{config.parent / 'data' / 'farm.db'}") as opened:
        yield opened
