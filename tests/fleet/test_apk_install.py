"""APKs from apk_tools on a virtual phone, through the real adb server's `adb install`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from apk_tools.keys import create_pem_key
from apk_tools.prepare import prepare
from apk_tools.standin import PACKAGE, build_standin_apk
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet

INSTALL_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def apks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The unsigned stand-in and the same file prepared with two different keys."""
    root = tmp_path_factory.mktemp("install")
    unsigned = build_standin_apk(root / "unsigned", version_code=2)
    key_a = create_pem_key(root / "a.pem", root / "a.crt", common_name="farm-a")
    key_b = create_pem_key(root / "b.pem", root / "b.crt", common_name="farm-b")
    return {
        "unsigned": unsigned,
        "signed_a": prepare(unsigned, key_a, root / "prepared"),
        "signed_b": prepare(unsigned, key_b, root / "prepared"),
        "older_a": prepare(build_standin_apk(root / "older", version_code=1), key_a,
                           root / "prepared"),
    }


def _install(server: AdbServerHandle, serial: str, apk: Path) -> tuple[int, str]:
    done = server.adb("-s", serial, "install", "-r", str(apk), timeout_s=INSTALL_TIMEOUT_S)
    return done.returncode, done.stdout + done.stderr


def _packages(server: AdbServerHandle, serial: str) -> str:
    return server.adb("-s", serial, "shell", "pm", "list", "packages").stdout


class TestApkInstall:
    """`adb install` of stand-in APKs on one virtual phone."""

    def test_signed_apk_installs(
        self,
        adb_server: AdbServerHandle,
        make_fleet: Callable[..., Fleet],
        apks: dict[str, Path],
    ) -> None:
        """The prepared (aligned, signed) APK installs and its package is listed."""
        serial = make_fleet(1).serials[0]
        code, output = _install(adb_server, serial, apks["signed_a"])
        assert code == 0, output
        assert "Success" in output
        assert f"package:{PACKAGE}" in _packages(adb_server, serial).splitlines()

    def test_unsigned_apk_is_refused(
        self,
        adb_server: AdbServerHandle,
        make_fleet: Callable[..., Fleet],
        apks: dict[str, Path],
    ) -> None:
        """The unsigned APK fails with INSTALL_PARSE_FAILED_NO_CERTIFICATES and is not installed."""
        serial = make_fleet(1).serials[0]
        code, output = _install(adb_server, serial, apks["unsigned"])
        assert code != 0
        assert "INSTALL_PARSE_FAILED_NO_CERTIFICATES" in output
        assert f"package:{PACKAGE}" not in _packages(adb_server, serial).splitlines()

    def test_other_key_cannot_update(
        self,
        adb_server: AdbServerHandle,
        make_fleet: Callable[..., Fleet],
        apks: dict[str, Path],
    ) -> None:
        """The same APK signed by another key fails over the first with UPDATE_INCOMPATIBLE."""
        serial = make_fleet(1).serials[0]
        assert _install(adb_server, serial, apks["signed_a"])[0] == 0
        code, output = _install(adb_server, serial, apks["signed_b"])
        assert code != 0
        assert "INSTALL_FAILED_UPDATE_INCOMPATIBLE" in output
        assert _install(adb_server, serial, apks["signed_a"])[0] == 0  # same key still updates

    def test_lower_version_is_refused(
        self,
        adb_server: AdbServerHandle,
        make_fleet: Callable[..., Fleet],
        apks: dict[str, Path],
    ) -> None:
        """A lower versionCode by the same key fails with VERSION_DOWNGRADE unless -d."""
        serial = make_fleet(1).serials[0]
        assert _install(adb_server, serial, apks["signed_a"])[0] == 0
        code, output = _install(adb_server, serial, apks["older_a"])
        assert code != 0
        assert "INSTALL_FAILED_VERSION_DOWNGRADE" in output
        done = adb_server.adb("-s", serial, "install", "-r", "-d", str(apks["older_a"]),
                              timeout_s=INSTALL_TIMEOUT_S)
        assert done.returncode == 0, done.stdout + done.stderr

    def test_full_storage_is_refused(
        self,
        adb_server: AdbServerHandle,
        make_fleet: Callable[..., Fleet],
        apks: dict[str, Path],
    ) -> None:
        """On a phone with full storage the install fails and nothing is installed."""
        phones = make_fleet(1)
        serial = phones.serials[0]
        phones.fill_storage(serial)
        code, output = _install(adb_server, serial, apks["signed_a"])
        assert code != 0
        assert "INSTALL_FAILED_INSUFFICIENT_STORAGE" in output or "No space left" in output
        assert f"package:{PACKAGE}" not in _packages(adb_server, serial).splitlines()
