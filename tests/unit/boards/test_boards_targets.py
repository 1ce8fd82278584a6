"""Tests for farm.jobs.board_targets: uname -m to LLVM triple, and the cross linker."""

from __future__ import annotations

import pytest

from farm.errors import SpecError, ToolMissing
from farm.jobs.board_targets import board_linker, board_target, triple_for


def _which(*installed: str):
    return lambda name: f"/usr/bin/{name}" if name in installed else None


class TestBoardTarget:
    def test_aarch64_from_x86_host(self):
        """An RK3399 seen from an x86_64 host gets the glibc aarch64 triple, NEON and its cores."""
        assert board_target("aarch64", 6, host_machine="x86_64") == {
            "kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"], "num-cores": 6}

    def test_armv7_is_hard_float(self):
        """A 32-bit ARM board's userland is armhf."""
        target = board_target("armv7l", 4, host_machine="x86_64")
        assert target["mtriple"] == "armv7l-linux-gnueabihf"

    def test_native_board_gets_host_target(self):
        """A board of the host's own machine gets LLVM's default triple, like a local server."""
        assert board_target("x86_64", 2, host_machine="x86_64") == {"kind": "llvm",
                                                                   "num-cores": 2}
        assert board_target("aarch64", 0, host_machine="arm64") == {"kind": "llvm"}

    def test_x86_board_from_arm_host_is_cross(self):
        """An x86_64 board seen from an arm64 host is a cross target."""
        assert board_target("x86_64", host_machine="aarch64")["mtriple"] == "x86_64-linux-gnu"

    def test_unknown_machine(self):
        """An unknown uname -m is a SpecError that lists the known ones."""
        with pytest.raises(SpecError, match=r"mips.*known: aarch64"):
            triple_for("mips")


class TestBoardLinker:
    def test_configured_cross_compiler(self):
        """The board's cc is resolved on PATH and links with -shared."""
        target = board_target("aarch64", host_machine="x86_64")
        linker = board_linker(target, "aarch64-linux-gnu-g++",
                              which=_which("aarch64-linux-gnu-g++"))
        assert linker.cc_path == "/usr/bin/aarch64-linux-gnu-g++"
        assert not linker.from_env

    def test_cross_without_cc_names_the_package(self):
        """A cross target with no cc and no Debian cross compiler names the package to install."""
        target = board_target("armv7l", host_machine="x86_64")
        with pytest.raises(ToolMissing, match=r"install g\+\+-arm-linux-gnueabihf"):
            board_linker(target, None, which=_which("g++"))

    def test_cross_without_cc_uses_debians_cross_compiler(self):
        """With no cc, a cross target links with Debian's <tuple>-g++ when it is installed."""
        target = board_target("armv7l", host_machine="x86_64")
        linker = board_linker(target, None, which=_which("arm-linux-gnueabihf-g++"))
        assert linker.cc_path == "/usr/bin/arm-linux-gnueabihf-g++"

    def test_missing_cc(self):
        """A configured cc that is not installed is a ToolMissing naming it."""
        target = board_target("aarch64", host_machine="x86_64")
        with pytest.raises(ToolMissing, match="aarch64-linux-gnu-g"):
            board_linker(target, "aarch64-linux-gnu-g++", which=_which())

    def test_native_uses_host_compiler(self):
        """A native board links with the host's default compiler."""
        linker = board_linker(board_target("x86_64", host_machine="x86_64"), None,
                              which=_which("g++"))
        assert linker.is_host
