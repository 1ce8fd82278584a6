"""The AArch64 runtime of emulated boards (farm.virtual.qemu): what it needs, what it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.errors import ToolMissing
from farm.virtual.board import VirtualBoard
from farm.virtual.qemu import QEMU, SYSROOT, Aarch64Runtime, ensure_runtime


class TestEnsureRuntime:
    def test_without_qemu_the_error_names_the_package(self, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
        """No qemu-aarch64-static on PATH: one line naming the Debian package, nothing built."""
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        with pytest.raises(ToolMissing, match="qemu-aarch64-static not found: install "
                                              "qemu-user-static"):
            ensure_runtime(tmp_path / "cache")
        assert not (tmp_path / "cache").exists()

    def test_programs_run_under_qemu_with_the_cross_sysroot(self, tmp_path: Path) -> None:
        """An AArch64 program's host argv is QEMU with the cross libc's prefix."""
        runtime = Aarch64Runtime(tmp_path, "0.27.0")
        assert runtime.argv(runtime.server, "server") == [
            QEMU, "-L", SYSROOT, str(tmp_path / "tvm_rpc.aarch64"), "server"]


class TestVirtualBoardArch:
    def test_unknown_arch_is_refused(self, tmp_path: Path) -> None:
        """A board of a machine farm cannot emulate is refused when made, naming the choices."""
        with pytest.raises(ValueError, match="unknown virtual board arch 'sparc'; known: host, "
                                             "aarch64"):
            VirtualBoard("vb1", tmp_path, tmp_path / "key", arch="sparc")
