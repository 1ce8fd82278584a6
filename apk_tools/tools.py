"""Find the Android build tools apk_tools runs: aapt, zipalign, apksigner, keytool.

Search order, as Android Gradle does for build tools: ``$ANDROID_HOME`` then
``$ANDROID_SDK_ROOT`` (``build-tools/<newest version>/``), then ``PATH`` (the
Debian packages ``aapt``, ``zipalign``, ``apksigner`` install into /usr/bin).
A missing tool raises :class:`farm.errors.ToolMissing` whose one-line hint names
both the SDK package and the Debian package to install.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from farm.errors import FarmError, ToolMissing

# The SDK ships these under build-tools/<version>/; keytool comes with a JDK.
_BUILD_TOOLS = ("aapt", "aapt2", "zipalign", "apksigner")

_DEBIAN_PACKAGE = {
    "aapt": "aapt android-framework-res",
    "aapt2": "aapt",
    "zipalign": "zipalign",
    "apksigner": "apksigner",
    "keytool": "default-jre-headless",
}

# Debian's android-framework-res puts the platform's framework-res.apk here; aapt
# needs it (or an SDK platform's android.jar) as -I to resolve android: attributes.
DEBIAN_FRAMEWORK_RES = Path("/usr/share/android-framework-res/framework-res.apk")


def install_hint(tool: str) -> str:
    """One line telling the user how to get ``tool``.

    Args:
        tool: the executable name, e.g. ``"apksigner"``.

    Returns:
        A sentence naming the SDK package and the Debian package.
    """
    debian = _DEBIAN_PACKAGE.get(tool, tool)
    if tool in _BUILD_TOOLS:
        return (
            "install the Android SDK package 'build-tools;<version>' (sdkmanager) and set "
            f"ANDROID_HOME, or run 'apt-get install {debian}'"
        )
    if tool == "keytool":
        return f"install a Java runtime: 'apt-get install {debian}' (or any JDK on PATH)"
    if tool == "framework-res.apk":
        return (
            "install the Android SDK package 'platforms;android-<api>' and set ANDROID_HOME, "
            "or run 'apt-get install android-framework-res'"
        )
    return f"run 'apt-get install {debian}'"


def _version_key(name: str) -> tuple[int, ...]:
    """Sort key for a build-tools folder name such as ``34.0.0`` or ``35.0.0-rc1``."""
    return tuple(int(part) for part in re.findall(r"\d+", name))


def _sdk_roots(env: Mapping[str, str]) -> list[Path]:
    return [Path(env[var]) for var in ("ANDROID_HOME", "ANDROID_SDK_ROOT") if env.get(var)]


def find_tool(tool: str, *, env: Mapping[str, str] | None = None) -> Path:
    """Locate an executable build tool.

    Args:
        tool: ``aapt``, ``aapt2``, ``zipalign``, ``apksigner`` or ``keytool``.
        env: the environment to read ``ANDROID_HOME``, ``ANDROID_SDK_ROOT`` and
            ``PATH`` from; defaults to ``os.environ``.

    Returns:
        The absolute path of the executable.

    Raises:
        ToolMissing: neither an SDK nor PATH has it.
    """
    env = os.environ if env is None else env
    if tool in _BUILD_TOOLS:
        for root in _sdk_roots(env):
            build_tools = root / "build-tools"
            versions = sorted(
                (d for d in build_tools.iterdir() if d.is_dir()) if build_tools.is_dir() else [],
                key=lambda d: _version_key(d.name),
                reverse=True,
            )
            for version_dir in versions:
                candidate = version_dir / tool
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return candidate
    if tool == "keytool" and env.get("JAVA_HOME"):
        candidate = Path(env["JAVA_HOME"]) / "bin" / "keytool"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(tool, path=env.get("PATH", ""))
    if found is None:
        raise ToolMissing(tool, install_hint(tool))
    return Path(found)


def find_framework_res(*, env: Mapping[str, str] | None = None) -> Path:
    """Locate the Android framework resources aapt links against (``-I``).

    Prefers the newest SDK ``platforms/android-<api>/android.jar``, then Debian's
    ``framework-res.apk``.

    Args:
        env: the environment to read ``ANDROID_HOME``/``ANDROID_SDK_ROOT`` from.

    Returns:
        Path of ``android.jar`` or ``framework-res.apk``.

    Raises:
        ToolMissing: neither is installed.
    """
    env = os.environ if env is None else env
    for root in _sdk_roots(env):
        platforms = root / "platforms"
        if platforms.is_dir():
            for platform in sorted(
                platforms.iterdir(), key=lambda d: _version_key(d.name), reverse=True
            ):
                if (platform / "android.jar").is_file():
                    return platform / "android.jar"
    if DEBIAN_FRAMEWORK_RES.is_file():
        return DEBIAN_FRAMEWORK_RES
    raise ToolMissing("framework-res.apk", install_hint("framework-res.apk"))


def run_tool(
    tool: str,
    args: Sequence[str],
    *,
    timeout_s: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run a build tool and capture its output; the caller judges the exit code.

    Args:
        tool: the tool name, located with :func:`find_tool`.
        args: its arguments, one per item (never a shell string).
        timeout_s: kill the tool after this many seconds.

    Returns:
        The finished process with text ``stdout`` and ``stderr``.

    Raises:
        ToolMissing: the tool is not installed.
        FarmError: the tool ran past ``timeout_s`` (it is killed).
    """
    executable = find_tool(tool)
    try:
        return subprocess.run(
            [str(executable), *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise FarmError(f"{tool} did not finish in {timeout_s:g} s") from exc
