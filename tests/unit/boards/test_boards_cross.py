"""A GEMM cross-compiled for an aarch64 board with its configured cross compiler."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from farm.jobs.board_targets import board_linker, board_target
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import build_gemm
from farm.jobs.params import GemmParams

CROSS_CC = "aarch64-linux-gnu-g++"
EM_AARCH64 = 183  # ELF e_machine of AArch64 (glibc elf.h)


@pytest.mark.skipif(shutil.which(CROSS_CC) is None,
                    reason=f"{CROSS_CC} is not installed (apt-get install g++-aarch64-linux-gnu)")
class TestCrossCompile:
    def test_gemm_for_an_aarch64_board_is_an_aarch64_library(self, tmp_path: Path) -> None:
        """The board's target and cc give an AArch64 ELF shared library, from an x86_64 host."""
        target = board_target("aarch64", 6, host_machine="x86_64")
        library = build_gemm(GemmParams(n=64, bn=16), target, CompileCache(tmp_path),
                             board_linker(target, CROSS_CC))
        header = library.read_bytes()[:20]
        assert header[:4] == b"\x7fELF"
        assert header[4] == 2  # ELFCLASS64
        assert int.from_bytes(header[18:20], "little") == EM_AARCH64

    def test_jobs_link_a_board_target_with_the_cross_compiler(self) -> None:
        """The jobs' linker (it sees only the target) picks Debian's cross compiler for it."""
        from farm.jobs.ndk import linker_for

        linker = linker_for(board_target("aarch64", host_machine="x86_64"))
        assert Path(linker.cc_path).name == CROSS_CC
