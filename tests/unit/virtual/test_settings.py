"""Tests for VirtualSettings: the virtual phones fit the tracker's network by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.config import Settings, load_config
from farm.errors import ConfigError


@pytest.fixture(autouse=True)
def _no_system_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("farm.config.DEFAULT_PATH", tmp_path / "absent.toml")


class TestVirtualNetwork:
    def test_follows_a_lan_tracker(self, tmp_path: Path) -> None:
        """With only tracker.network = lan set, the virtual phones are lan phones."""
        settings = load_config(env={"FARM_DATA_DIR": str(tmp_path),
                                    "FARM_TRACKER__NETWORK": "lan"})
        assert settings.virtual.network == "lan"

    def test_follows_the_default_tracker(self, tmp_path: Path) -> None:
        """With nothing set, virtual phones are usb-only like the default tracker."""
        settings = Settings.model_validate({"data_dir": str(tmp_path)})
        assert (settings.tracker.network, settings.virtual.network) == ("usb-only", "usb-only")

    def test_an_explicit_value_wins(self, tmp_path: Path) -> None:
        """virtual.network set in the file is kept even when the tracker differs."""
        settings = Settings.model_validate({"data_dir": str(tmp_path),
                                            "tracker": {"network": "usb-only"},
                                            "virtual": {"network": "lan", "count": 2}})
        assert (settings.virtual.network, settings.virtual.count) == ("lan", 2)

    def test_a_bad_tracker_value_names_the_tracker(self, tmp_path: Path) -> None:
        """A bad tracker.network is reported as the tracker's, not the virtual phones'."""
        with pytest.raises(ConfigError) as caught:
            load_config(env={"FARM_DATA_DIR": str(tmp_path), "FARM_TRACKER__NETWORK": "wifi"})
        assert caught.value.key == "tracker.network"
