"""systemd/farmd.service: systemd-analyze verify accepts it, and it keeps its promises."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "farmd.service"
EXEC_START = "/usr/local/bin/farmd"


def settings(text: str) -> dict[str, dict[str, list[str]]]:
    """Parse a unit file into {section: {key: [values in order]}} (keys may repeat)."""
    parsed: dict[str, dict[str, list[str]]] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            parsed.setdefault(section, {})
            continue
        key, _, value = line.partition("=")
        parsed[section].setdefault(key.strip(), []).append(value.strip())
    return parsed


@pytest.fixture(scope="module")
def service() -> dict[str, list[str]]:
    """The [Service] section of the shipped unit."""
    return settings(UNIT.read_text())["Service"]


class TestFarmdUnit:
    def test_systemd_analyze_verify(self, tmp_path: Path) -> None:
        """systemd-analyze verify passes with no warnings once ExecStart names an executable."""
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            pytest.skip("systemd-analyze is not installed")
        farmd = tmp_path / "farmd"
        farmd.write_text("#!/bin/sh\nexit 0\n")
        farmd.chmod(0o755)
        text = UNIT.read_text()
        assert EXEC_START in text
        unit = tmp_path / "farmd.service"
        unit.write_text(text.replace(EXEC_START, str(farmd)))
        done = subprocess.run(
            [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        # verify exits 0 even on unknown keys; it only warns. Warnings fail this test.
        assert [line for line in done.stderr.splitlines() if unit.name in line] == []

    def test_notify_and_watchdog(self, service: dict[str, list[str]]) -> None:
        """farmd is Type=notify with a 30 s watchdog only its main process may feed."""
        assert service["Type"] == ["notify"]
        assert service["WatchdogSec"] == ["30"]
        assert service["NotifyAccess"] == ["main"]
        assert service["Restart"] == ["on-failure"]

    def test_exec_start(self, service: dict[str, list[str]]) -> None:
        """It runs the installed farmd with the system config file."""
        assert service["ExecStart"] == [f"{EXEC_START} --config /etc/farm/farm.toml"]

    def test_stop_timeout_covers_drain(self, service: dict[str, list[str]]) -> None:
        """systemd waits longer than farmd's 120 s default drain before SIGKILL."""
        assert int(service["TimeoutStopSec"][0]) > 120
        assert service["KillMode"] == ["mixed"]

    def test_hardening_keeps_usb_and_state(self, service: dict[str, list[str]]) -> None:
        """The sandbox is strict but leaves USB devices and /var/lib/farm reachable."""
        for key, value in [
            ("NoNewPrivileges", "yes"),
            ("ProtectSystem", "strict"),
            ("ProtectHome", "yes"),
            ("PrivateTmp", "yes"),
            ("ReadWritePaths", "/var/lib/farm"),
            ("StateDirectory", "farm"),
            ("DeviceAllow", "char-usb_device rw"),
            ("User", "farm"),
            ("SupplementaryGroups", "plugdev"),
        ]:
            assert service[key] == [value], key
        assert "PrivateDevices" not in service
