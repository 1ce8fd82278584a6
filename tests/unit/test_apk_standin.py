"""The aapt-built stand-in TVM RPC APK and its empty classes.dex."""

from __future__ import annotations

import hashlib
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from apk_tools.inspect import inspect_apk
from apk_tools.standin import PACKAGE, build_standin_apk, empty_dex
from farm.errors import ApkError


class TestEmptyDex:
    """empty_dex() -> bytes."""

    def test_header_checksum_signature_and_size_are_consistent(self) -> None:
        """Magic, file_size, Adler-32 checksum and SHA-1 signature match the dex-format rules."""
        dex = empty_dex()
        assert dex[:8] == b"dex\n035\x00"
        (checksum,) = struct.unpack_from("<I", dex, 8)
        assert checksum == zlib.adler32(dex[12:])
        assert dex[12:32] == hashlib.sha1(dex[32:], usedforsecurity=False).digest()
        file_size, header_size, endian_tag = struct.unpack_from("<III", dex, 32)
        assert (file_size, header_size, endian_tag) == (len(dex), 0x70, 0x12345678)

    def test_map_list_covers_header_and_itself(self) -> None:
        """The map at map_off lists the header item (0x0000) and the map list (0x1000)."""
        dex = empty_dex()
        (map_off,) = struct.unpack_from("<I", dex, 52)
        (count,) = struct.unpack_from("<I", dex, map_off)
        items = [struct.unpack_from("<HHII", dex, map_off + 4 + 12 * i) for i in range(count)]
        assert items == [(0x0000, 0, 1, 0), (0x1000, 0, 1, map_off)]


class TestBuildStandinApk:
    """build_standin_apk(out_dir, ...)."""

    def test_version_and_debuggable_are_set_at_build_time(self, tmp_path: Path) -> None:
        """versionCode, versionName and debuggable come from the arguments."""
        apk = build_standin_apk(
            tmp_path, version_code=17, version_name="0.17-dev", debuggable=False
        )
        info = inspect_apk(apk)
        assert (info.package, info.version_code, info.version_name, info.debuggable) == (
            PACKAGE,
            17,
            "0.17-dev",
            False,
        )
        assert info.permissions == ("android.permission.INTERNET",)

    def test_contains_manifest_resources_and_dex_only(self, tmp_path: Path) -> None:
        """The APK holds the compiled manifest, resources.arsc and classes.dex, nothing else."""
        apk = build_standin_apk(tmp_path)
        with zipfile.ZipFile(apk) as archive:
            assert sorted(archive.namelist()) == [
                "AndroidManifest.xml",
                "classes.dex",
                "resources.arsc",
            ]
            assert archive.read("classes.dex") == empty_dex()

    def test_leaves_only_the_apk_in_out_dir(self, tmp_path: Path) -> None:
        """Build folders are removed; only the finished APK remains."""
        apk = build_standin_apk(tmp_path / "out", version_code=3)
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [apk.name]

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [({"version_code": 0}, "version_code"), ({"native_abis": ["../x"]}, "ABI")],
    )
    def test_bad_arguments_are_apk_errors(self, tmp_path: Path, kwargs: dict, match: str) -> None:
        """An out-of-range versionCode or a path-like ABI raises ApkError before aapt runs."""
        with pytest.raises(ApkError, match=match):
            build_standin_apk(tmp_path, **kwargs)
        assert list(tmp_path.iterdir()) == []
