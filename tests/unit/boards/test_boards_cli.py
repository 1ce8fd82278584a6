"""Tests for farm.virtual.board_cli's [[boards]] output."""

from __future__ import annotations

import tomllib
from pathlib import Path

from farm.config import BoardSettings, Settings
from farm.virtual.board_cli import boards_toml


class TestBoardsToml:
    def test_round_trip(self):
        """The printed tables load back into the same board settings."""
        boards = [
            BoardSettings(name="vb1", host="127.0.0.1", port=40022, user="farm",
                          key_file=Path("/k/id \"q\""), work_dir="/w/vb1", reboot_allowed=True),
            BoardSettings(name="vb2", host="127.0.0.1", port=40023, user="farm",
                          command_timeout_s=60.0),
        ]
        settings = Settings.model_validate(tomllib.loads(boards_toml(boards)))
        assert list(settings.boards) == boards
