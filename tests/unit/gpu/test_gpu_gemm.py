"""The seeds' GEMM on target cuda: built on a host with no GPU, refused where CUDA cannot run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.errors import SpecError
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import build_gemm, cache_key, gemm_module, schedule_gpu
from farm.jobs.params import DeviceKind, GemmParams
from farm.jobs.targets import cuda_target, runtime_device_name, work_group_limit
from farm.kinds.gemm import GemmSpec

H100 = cuda_target("sm_90", {"max_threads_per_block": 1024, "warp_size": 32,
                             "max_shared_memory_per_block": 48 * 1024})


class TestCudaTarget:
    def test_target_is_accepted_by_tvm(self) -> None:
        """TVM takes the dict: kind cuda, arch sm_90, the GPU's limits, the host's LLVM."""
        import tvm

        target = tvm.target.Target(H100)
        assert target.kind.name == "cuda"
        assert str(target.attrs["arch"]) == "sm_90"
        assert target.host is not None and target.host.kind.name == "llvm"

    def test_sessions_ask_for_cuda_and_blocks_hold_1024_threads(self) -> None:
        """The runtime device is cuda; a block may hold 1024 threads (CUDA's limit)."""
        assert runtime_device_name(H100) == "cuda"
        assert work_group_limit(H100) == 1024


class TestCudaGemm:
    def test_thread_block_schedule_binds_blocks_and_threads(self) -> None:
        """The 16x16 schedule binds the tiles to blockIdx and the inside to threadIdx."""
        script = schedule_gpu(gemm_module(64, "float32"), 16).script()
        for axis in ("blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x"):
            assert axis in script

    def test_builds_a_cuda_library_without_a_gpu(self, tmp_path: Path) -> None:
        """A cuda GEMM compiles and links here (no GPU, no nvcc), cached under its device."""
        params = GemmParams(n=64, bn=16, device=DeviceKind.CUDA)
        library = build_gemm(params, H100, CompileCache(tmp_path))
        assert library.is_file() and library.stat().st_size > 0
        assert cache_key(params, H100).schedule.startswith("cuda bn=16")

    def test_blocks_over_1024_threads_are_refused(self) -> None:
        """bn=64 needs 4096 threads per block, more than CUDA allows: SpecError naming bn <= 32."""
        with pytest.raises(SpecError, match="bn <= 32"):
            build_gemm(GemmParams(n=128, bn=64, device=DeviceKind.CUDA), H100,
                       CompileCache(Path("/nonexistent")))

    def test_spec_accepts_target_cuda_with_a_16_block_default(self) -> None:
        """A gemm job spec may ask for target cuda; its default block is 16x16."""
        spec = GemmSpec(n=1024, target="cuda")
        assert spec.bn == 16
        assert spec.work_group_threads == 256
