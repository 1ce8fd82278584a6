"""Linking compiled kernels into a ``.so`` the phone can ``dlopen``.

Real phones need the Android NDK's clang: TVM's own helper
``tvm.support.ndk.create_shared`` runs the compiler named by ``TVM_NDK_CC``
(apache/tvm ``python/tvm/support/ndk.py``). When that is not set, farm looks
for ``<triple><api>-clang++`` under ``$ANDROID_NDK_HOME/toolchains/llvm/prebuilt/*/bin``,
the NDK's standard layout (NDK r19+, ``docs/BuildSystemMaintainers.md``).
Host targets (virtual phones) link with the host compiler TVM picks by default.

The linker is resolved *before* anything is compiled, so a missing NDK fails the
job at once with :class:`~farm.errors.ToolMissing` saying what to set, instead of
after minutes of compiling.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from farm.errors import ToolMissing
from farm.jobs.board_targets import board_linker
from farm.jobs.linker import Linker
from farm.jobs.targets import host_of, needs_ndk

#: Android API level assumed when the NDK offers several: Android 9, the oldest the
#: farm's phones run and the level of TVM's android_rpc app build.
DEFAULT_API_LEVEL = 28

_NDK_HINT = (
    "set TVM_NDK_CC to the NDK clang++ for the phone's ABI (e.g. "
    ".../toolchains/llvm/prebuilt/linux-x86_64/bin/aarch64-linux-android28-clang++) "
    "or ANDROID_NDK_HOME to the NDK folder"
)


def _api_of(path: Path, triple: str) -> int:
    match = re.fullmatch(re.escape(triple) + r"(\d+)-clang\+\+", path.name)
    return int(match.group(1)) if match else -1


def find_ndk_clang(triple: str, ndk_home: Path, api_level: int = DEFAULT_API_LEVEL) -> Path | None:
    """The NDK's ``clang++`` wrapper for a triple, or None.

    Args:
        triple: LLVM triple, e.g. ``"aarch64-linux-android"``.
        ndk_home: the NDK folder (``ANDROID_NDK_HOME``).
        api_level: preferred Android API level; the highest level at or below it
            is chosen, else the lowest above it.
    """
    candidates = [
        p
        for p in ndk_home.glob(f"toolchains/llvm/prebuilt/*/bin/{triple}*-clang++")
        if _api_of(p, triple) > 0 and os.access(p, os.X_OK)
    ]
    if not candidates:
        return None
    below = [p for p in candidates if _api_of(p, triple) <= api_level]
    if below:
        return max(below, key=lambda p: _api_of(p, triple))
    return min(candidates, key=lambda p: _api_of(p, triple))


def linker_for(
    target: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    api_level: int = DEFAULT_API_LEVEL,
) -> Linker:
    """Resolve how to link libraries for a target, before compiling anything.

    Args:
        target: a target dict from :func:`farm.jobs.targets.target_for`.
        env: environment to read ``TVM_NDK_CC`` / ``ANDROID_NDK_HOME`` from;
            defaults to ``os.environ``.
        api_level: preferred Android API level of the NDK compiler.

    Returns:
        The linker to pass as ``fcompile``.

    A ``*-linux-gnu`` target (a Linux board, :mod:`farm.jobs.board_targets`) is
    linked by Debian's cross compiler of its triple (``aarch64-linux-gnu-g++``).

    Raises:
        ToolMissing: the target needs the NDK and none is configured, a board's
            cross compiler is not installed, or the host has no C compiler.
    """
    env = os.environ if env is None else env
    if not needs_ndk(dict(target)) and host_of(dict(target)).get("mtriple"):
        # A glibc Linux board of another machine: its Debian cross compiler.
        return board_linker(host_of(dict(target)), None)
    if not needs_ndk(dict(target)):
        if not any(shutil.which(name) for name in ("g++", "c++", "clang++", "gcc", "cc")):
            raise ToolMissing("c++", "install a C++ compiler (apt-get install g++)")
        return Linker()
    triple = str(host_of(dict(target))["mtriple"])
    from_env = env.get("TVM_NDK_CC", "")
    if from_env:
        if not os.access(from_env, os.X_OK):
            raise ToolMissing(from_env, f"TVM_NDK_CC is not an executable file; {_NDK_HINT}")
        return Linker(cc_path=from_env, from_env=True)
    for var in ("ANDROID_NDK_HOME", "ANDROID_NDK_ROOT"):
        home = env.get(var, "")
        if home:
            clang = find_ndk_clang(triple, Path(home), api_level)
            if clang is not None:
                return Linker(cc_path=str(clang))
            raise ToolMissing(
                f"{triple}-clang++", f"no {triple}<api>-clang++ under {var}={home}; {_NDK_HINT}"
            )
    raise ToolMissing(f"NDK clang for {triple}", _NDK_HINT)
