"""Resolving the linker before compiling."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from farm.errors import ToolMissing
from farm.jobs.ndk import find_ndk_clang, linker_for

ARM64 = {"kind": "llvm", "mtriple": "aarch64-linux-android"}


def _fake_clang(ndk: Path, name: str) -> Path:
    path = ndk / "toolchains/llvm/prebuilt/linux-x86_64/bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


class TestLinkerFor:
    def test_host_targets_link_with_the_host_compiler(self) -> None:
        """A target without an Android triple needs no NDK."""
        assert linker_for({"kind": "llvm"}, env={}).is_host

    def test_missing_ndk_says_what_to_set(self) -> None:
        """Without TVM_NDK_CC or ANDROID_NDK_HOME the error names both variables."""
        with pytest.raises(ToolMissing) as info:
            linker_for(ARM64, env={})
        assert "TVM_NDK_CC" in info.value.install_hint
        assert "ANDROID_NDK_HOME" in info.value.install_hint

    def test_tvm_ndk_cc_wins(self, tmp_path: Path) -> None:
        """TVM_NDK_CC is used through TVM's ndk helper when it is executable."""
        cc = _fake_clang(tmp_path, "aarch64-linux-android30-clang++")
        linker = linker_for(ARM64, env={"TVM_NDK_CC": str(cc)})
        assert linker.cc_path == str(cc)
        assert linker.from_env

    def test_tvm_ndk_cc_that_is_not_a_program_is_refused(self, tmp_path: Path) -> None:
        """A TVM_NDK_CC pointing nowhere is reported, not used."""
        with pytest.raises(ToolMissing):
            linker_for(ARM64, env={"TVM_NDK_CC": str(tmp_path / "nope")})

    def test_compiler_found_under_android_ndk_home(self, tmp_path: Path) -> None:
        """The triple's clang++ is found in the NDK's prebuilt toolchain."""
        cc = _fake_clang(tmp_path, "aarch64-linux-android28-clang++")
        linker = linker_for(ARM64, env={"ANDROID_NDK_HOME": str(tmp_path)})
        assert linker.cc_path == str(cc)
        assert not linker.from_env

    def test_ndk_without_the_triple_is_reported(self, tmp_path: Path) -> None:
        """An NDK lacking the triple's compiler raises, naming the folder."""
        _fake_clang(tmp_path, "x86_64-linux-android28-clang++")
        with pytest.raises(ToolMissing) as info:
            linker_for(ARM64, env={"ANDROID_NDK_HOME": str(tmp_path)})
        assert str(tmp_path) in info.value.install_hint


class TestFindNdkClang:
    def test_highest_api_at_or_below_the_wanted_one(self, tmp_path: Path) -> None:
        """Among API levels 21, 28 and 33, API 30 picks 28."""
        for api in (21, 28, 33):
            _fake_clang(tmp_path, f"aarch64-linux-android{api}-clang++")
        found = find_ndk_clang("aarch64-linux-android", tmp_path, api_level=30)
        assert found is not None
        assert found.name == "aarch64-linux-android28-clang++"

    def test_lowest_above_when_none_is_below(self, tmp_path: Path) -> None:
        """If every level is above the wanted one, the lowest is chosen."""
        for api in (31, 33):
            _fake_clang(tmp_path, f"aarch64-linux-android{api}-clang++")
        found = find_ndk_clang("aarch64-linux-android", tmp_path, api_level=24)
        assert found is not None
        assert found.name == "aarch64-linux-android31-clang++"
