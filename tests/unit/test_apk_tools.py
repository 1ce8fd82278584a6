"""Tool discovery: SDK build-tools (newest first), then PATH, else ToolMissing."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from apk_tools.tools import find_framework_res, find_tool, install_hint
from farm.errors import ToolMissing


def _fake_tool(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


class TestFindTool:
    """find_tool(name, env=...)."""

    def test_prefers_newest_sdk_build_tools(self, tmp_path: Path) -> None:
        """ANDROID_HOME/build-tools/<newest>/ wins over older versions and PATH."""
        sdk = tmp_path / "sdk"
        _fake_tool(sdk / "build-tools" / "9.0.0" / "zipalign")
        newest = _fake_tool(sdk / "build-tools" / "34.0.0" / "zipalign")
        _fake_tool(sdk / "build-tools" / "30.0.3" / "zipalign")
        on_path = _fake_tool(tmp_path / "bin" / "zipalign")
        env = {"ANDROID_HOME": str(sdk), "PATH": str(on_path.parent)}
        assert find_tool("zipalign", env=env) == newest

    def test_android_sdk_root_is_searched_too(self, tmp_path: Path) -> None:
        """ANDROID_SDK_ROOT is used when ANDROID_HOME is unset."""
        tool = _fake_tool(tmp_path / "sdk" / "build-tools" / "35.0.0-rc1" / "apksigner")
        assert find_tool("apksigner", env={"ANDROID_SDK_ROOT": str(tmp_path / "sdk")}) == tool

    def test_falls_back_to_path(self, tmp_path: Path) -> None:
        """Without an SDK the tool is found on PATH."""
        tool = _fake_tool(tmp_path / "bin" / "aapt")
        assert find_tool("aapt", env={"PATH": str(tool.parent)}) == tool

    @pytest.mark.parametrize(
        ("tool", "debian"),
        [
            ("apksigner", "apksigner"),
            ("zipalign", "zipalign"),
            ("aapt", "aapt android-framework-res"),
        ],
    )
    def test_missing_tool_names_sdk_and_debian_package(
        self, tmp_path: Path, tool: str, debian: str
    ) -> None:
        """A missing tool raises ToolMissing with a one-line hint naming both packages."""
        with pytest.raises(ToolMissing) as caught:
            find_tool(tool, env={"PATH": str(tmp_path)})
        assert caught.value.tool == tool
        assert "build-tools" in caught.value.install_hint
        assert f"apt-get install {debian}" in caught.value.install_hint
        assert "\n" not in str(caught.value)

    def test_keytool_hint_names_a_java_runtime(self) -> None:
        """keytool's hint points at a Java package."""
        assert "apt-get install default-jre-headless" in install_hint("keytool")


class TestFindFrameworkRes:
    """find_framework_res(env=...)."""

    def test_prefers_newest_sdk_platform(self, tmp_path: Path) -> None:
        """The newest platforms/android-<api>/android.jar is chosen."""
        for api in (29, 34, 9):
            jar = tmp_path / "platforms" / f"android-{api}" / "android.jar"
            jar.parent.mkdir(parents=True)
            jar.write_bytes(b"PK")
        found = find_framework_res(env={"ANDROID_HOME": str(tmp_path)})
        assert found == tmp_path / "platforms" / "android-34" / "android.jar"
