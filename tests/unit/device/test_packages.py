"""Tests for farm.device.packages."""

import pytest

from farm.device.packages import (
    PM_ERROR,
    InstallOutcome,
    PackageVersion,
    parse_dumpsys_package_version,
    parse_pm_install,
    parse_pm_list_packages,
    parse_pm_path,
    signature_hash_hex,
)


class TestParsePmInstall:
    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            ("pm_install__success.txt", InstallOutcome(True, "", "")),
            ("adb_install_host__success.txt", InstallOutcome(True, "", "")),
            (
                "pm_install__failure_insufficient_storage.txt",
                InstallOutcome(
                    False,
                    "INSTALL_FAILED_INSUFFICIENT_STORAGE",
                    "Failed to override installation location",
                ),
            ),
            (
                "pm_install__failure_no_certificates_unsigned.txt",
                InstallOutcome(
                    False,
                    "INSTALL_PARSE_FAILED_NO_CERTIFICATES",
                    "Failed to collect certificates from /data/app/vmdl1165101821.tmp/"
                    "base.apk: Attempt to get length of null array",
                ),
            ),
            (
                "pm_install__failure_update_incompatible_android12plus.txt",
                InstallOutcome(
                    False,
                    "INSTALL_FAILED_UPDATE_INCOMPATIBLE",
                    "Existing package org.torproject.vpn signatures do not match newer "
                    "version; ignoring!",
                ),
            ),
            (
                "pm_install__failure_update_incompatible_legacy.txt",
                InstallOutcome(
                    False,
                    "INSTALL_FAILED_UPDATE_INCOMPATIBLE",
                    "Package juloo.keyboard2.debug signatures do not match previously "
                    "installed version; ignoring!",
                ),
            ),
            (
                "adb_install_host__failure_update_incompatible.txt",
                InstallOutcome(
                    False,
                    "INSTALL_FAILED_UPDATE_INCOMPATIBLE",
                    "Package juloo.keyboard2.debug signatures do not match previously "
                    "installed version; ignoring!",
                ),
            ),
            (
                "pm_install__failure_version_downgrade.txt",
                InstallOutcome(
                    False,
                    "INSTALL_FAILED_VERSION_DOWNGRADE",
                    "Downgrade detected: Update version code 1968 is older than current 2843",
                ),
            ),
        ],
    )
    def test_every_fixture(self, fixture_text, name, expected):
        """Each success and failure capture gives its exact outcome."""
        assert parse_pm_install(fixture_text(name)) == expected

    def test_failure_on_stderr(self, fixture_text):
        """A Failure line that arrives on stderr is still read."""
        stderr = fixture_text("pm_install__failure_version_downgrade.txt")
        assert parse_pm_install("", stderr).code == "INSTALL_FAILED_VERSION_DOWNGRADE"

    def test_code_without_message(self):
        """``Failure [CODE]`` alone gives an empty message."""
        assert parse_pm_install("Failure [INSTALL_FAILED_INVALID_APK]\n") == InstallOutcome(
            False, "INSTALL_FAILED_INVALID_APK", ""
        )

    def test_error_line(self):
        """An ``Error:`` line without a Failure code is a PM_ERROR failure."""
        outcome = parse_pm_install("", "Error: Unable to open file: /data/local/tmp/x.apk\n")
        assert outcome == InstallOutcome(
            False, PM_ERROR, "Unable to open file: /data/local/tmp/x.apk"
        )

    def test_unreadable(self):
        """Output with neither Success nor Failure raises."""
        with pytest.raises(ValueError, match="neither Success nor Failure"):
            parse_pm_install("Performing Streamed Install\n")


class TestParsePmPath:
    def test_split_apks(self, fixture_text):
        """Each split is one path, base.apk first."""
        paths = parse_pm_path(fixture_text("pm_path__split_apks_android11plus.txt"))
        assert len(paths) == 4
        assert paths[0].endswith("==/base.apk")
        assert paths[3].endswith("/split_config.xxhdpi.apk")

    def test_system_app(self, fixture_text):
        """A system app's single APK."""
        assert parse_pm_path(
            fixture_text("pm_path__system_app__mtk_tb8168_android13_derived.txt")
        ) == ["/system/system_ext/app/Camera/Camera.apk"]

    def test_not_installed(self, fixture_text):
        """Empty output means not installed."""
        assert parse_pm_path(fixture_text("pm_path__not_installed.txt")) == []

    def test_garbage(self):
        """A line without ``package:`` raises."""
        with pytest.raises(ValueError, match="cannot read"):
            parse_pm_path("Error: no such package\n")


class TestParsePmListPackages:
    def test_mtk(self, fixture_text):
        """All 141 names in printed order."""
        names = parse_pm_list_packages(
            fixture_text("pm_list_packages__mtk_tb8168_android13_derived.txt")
        )
        assert len(names) == 141
        assert names[0] == "com.android.cts.priv.ctsshim"
        assert "com.mediatek.camera" in names

    def test_with_paths(self):
        """The ``-f`` form keeps the name after the last ``=`` even when the path has ``==``."""
        text = (
            "package:/data/app/~~u3z==/org.apache.tvm.tvmrpc-X==/base.apk=org.apache.tvm.tvmrpc\n"
        )
        assert parse_pm_list_packages(text) == ["org.apache.tvm.tvmrpc"]


class TestParseDumpsysPackageVersion:
    def test_mtk_camera(self, fixture_text):
        """versionCode, versionName and the signer hash of the camera app."""
        text = fixture_text("dumpsys_package__mtk_tb8168_android13_com.mediatek.camera_excerpt.txt")
        assert parse_dumpsys_package_version(text, "com.mediatek.camera") == PackageVersion(
            60030, "1.1.60030", ("3cda6734",)
        )

    def test_not_installed(self, fixture_text):
        """A dump without the package's block gives None."""
        text = fixture_text("dumpsys_package__mtk_tb8168_android13_com.mediatek.camera_excerpt.txt")
        assert parse_dumpsys_package_version(text, "org.apache.tvm.tvmrpc") is None

    def test_missing_version_code(self):
        """A block without versionCode raises."""
        text = "Packages:\n  Package [a.b] (1f):\n    versionName=1\n"
        with pytest.raises(ValueError, match="versionCode"):
            parse_dumpsys_package_version(text, "a.b")


class TestSignatureHashHex:
    def test_java_arrays_hashcode(self):
        """Matches Java Arrays.hashCode: signed bytes, 32-bit wrap, unsigned hex."""
        assert signature_hash_hex(b"") == "1"
        assert signature_hash_hex(b"\x01") == "20"  # 31*1 + 1 = 32
        assert signature_hash_hex(b"\xff") == "1e"  # 31*1 + (-1) = 30
        assert signature_hash_hex(b"abc") == "1ecc1"  # ((31 + 97) * 31 + 98) * 31 + 99
        # Reference from jshell (Java 17): Integer.toHexString(Arrays.hashCode(b)) with
        # b[i] = (byte) (i * 7) for i in 0..1023, which wraps past 2**32 many times.
        assert signature_hash_hex(bytes((i * 7) % 256 for i in range(1024))) == "77540201"
