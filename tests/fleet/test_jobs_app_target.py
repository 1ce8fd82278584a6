"""Where a phone's app points (``app_target``) and how it can be configured (``detect_method``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from farm.adb import Adb, AdbServer
from farm.config import Settings
from farm.provision.app_target import app_target, app_target_for, detect_method
from farm.provision.launch import AppTarget, Method
from farm.provision.standin import demo_apk
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet


class TestAppTarget:
    def test_usb_only_points_at_the_reversed_port_on_the_phone(self) -> None:
        """A usb-only phone reaches the tracker at its own 127.0.0.1 on the device port."""
        settings = Settings.model_validate(
            {"tracker": {"host": "10.1.2.3", "port": 9300, "device_port": 9190}})
        assert app_target(settings, "k") == AppTarget("127.0.0.1", 9190, "k")

    def test_usb_only_without_device_port_uses_the_tracker_port(self) -> None:
        """With no device port configured, the reversed port equals the tracker's."""
        assert app_target_for("usb-only", ("10.1.2.3", 9300), "k") == AppTarget(
            "127.0.0.1", 9300, "k"
        )

    def test_lan_prefers_phone_host(self) -> None:
        """A lan phone uses phone_host when set, else the tracker's host, with the tracker's
        port."""
        tracker = {"network": "lan", "host": "0.0.0.0", "port": 9300, "phone_host": "10.0.0.5"}  # noqa: S104 - a value, nothing binds
        settings = Settings.model_validate({"tracker": tracker})
        assert app_target(settings, "k") == AppTarget("10.0.0.5", 9300, "k")
        assert app_target_for("lan", ("10.1.2.3", 9300), "k") == AppTarget("10.1.2.3", 9300, "k")


class TestDetectMethod:
    def test_run_as_only_once_the_debuggable_app_is_installed(
        self, make_fleet: Callable[..., Fleet], adb_server: AdbServerHandle, tmp_path: Path,
    ) -> None:
        """Without the app run-as cannot work; with the debuggable stand-in app it does."""
        phones = make_fleet(1)
        serial = phones.serials[0]
        adb = Adb(AdbServer(port=adb_server.port))
        assert detect_method(adb, serial) is not Method.RUN_AS
        installed = adb_server.adb("-s", serial, "install", str(demo_apk(tmp_path / "apk")),
                                   timeout_s=120)
        assert installed.returncode == 0, installed.stderr
        assert detect_method(adb, serial) is Method.RUN_AS
