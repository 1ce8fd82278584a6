"""The GEMM schedules, compiled on the host without a phone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tvm

from farm.errors import SpecError
from farm.jobs.cache import CompileCache
from farm.jobs.gemm import build_gemm, cache_key, gemm_module, schedule_cpu, schedule_gpu
from farm.jobs.params import DeviceFacts, DeviceKind, GemmParams, GemmSchedule
from farm.jobs.targets import target_for


class TestScheduleCpu:
    def test_scheduled_kernel_computes_the_product(self) -> None:
        """The tiled, vectorised, parallel kernel equals numpy's A @ B on the host."""
        lib = tvm.compile(schedule_cpu(gemm_module(64, "float32"), 16), target={"kind": "llvm"})
        rng = np.random.default_rng(0)
        a_np, b_np = rng.random((64, 64), "float32"), rng.random((64, 64), "float32")
        dev = tvm.cpu()
        a, b = tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev)
        c = tvm.runtime.tensor(np.zeros((64, 64), "float32"), dev)
        lib["gemm"](a, b, c)
        np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4)

    def test_loops_are_parallel_and_vectorised(self) -> None:
        """The schedule's TIR has a parallel outer loop and a vectorised inner loop."""
        script = schedule_cpu(gemm_module(64, "float32"), 16).script()
        assert "T.parallel" in script
        assert "T.vectorized" in script


class TestScheduleOpencl:
    def test_tiles_are_bound_to_work_groups(self) -> None:
        """The seeds' GPU schedule yields an OpenCL kernel indexed by group and local ids."""
        target = target_for(
            DeviceFacts(abi="arm64-v8a", gpu="Mali-G710", has_opencl=True), DeviceKind.OPENCL
        )
        mod = schedule_gpu(gemm_module(64, "float32"), 16)
        executable = tvm.compile(mod, target=tvm.target.Target(target))
        source = executable.mod.imports[0].inspect_source()
        assert "__kernel" in source
        assert "get_group_id" in source
        assert "get_local_id" in source

    def test_work_group_over_256_threads_is_refused(self, tmp_path: Path) -> None:
        """bn=32 means 1024 threads per work-group, more than phone GPUs allow."""
        facts = DeviceFacts(abi="x86_64", host_runtime=True, has_opencl=True)
        params = GemmParams(n=64, bn=32, device=DeviceKind.OPENCL)
        with pytest.raises(SpecError):
            build_gemm(params, target_for(facts, DeviceKind.OPENCL), CompileCache(tmp_path))

    def test_phone_allowing_1024_threads_builds_bn_32(self, tmp_path: Path) -> None:
        """An Adreno whose work-group limit, read from the phone, is 1024 builds bn=32."""
        facts = DeviceFacts(abi="x86_64", host_runtime=True, gpu="adreno qualcomm", has_opencl=True,
                            gpu_limits={"opencl": {"max_threads_per_block": 1024}})
        params = GemmParams(n=64, bn=32, device=DeviceKind.OPENCL)
        path = build_gemm(params, target_for(facts, DeviceKind.OPENCL), CompileCache(tmp_path))
        assert path.is_file()

    def test_phone_limit_below_bn_squared_names_the_limit(self, tmp_path: Path) -> None:
        """A phone limit of 512 refuses bn=32 with the limit, its source and the largest bn."""
        facts = DeviceFacts(abi="x86_64", host_runtime=True, has_opencl=True,
                            gpu_limits={"opencl": {"max_threads_per_block": 512}})
        params = GemmParams(n=64, bn=32, device=DeviceKind.OPENCL)
        with pytest.raises(SpecError) as caught:
            build_gemm(params, target_for(facts, DeviceKind.OPENCL), CompileCache(tmp_path))
        assert caught.value.field == "params.bn"
        assert "limit of 512 (read from the phone); use bn <= 22" in str(caught.value)

    def test_unread_limit_says_it_was_assumed(self, tmp_path: Path) -> None:
        """Without the phone's limit the error says 256 was assumed."""
        params = GemmParams(n=64, bn=32, device=DeviceKind.OPENCL)
        facts = DeviceFacts(abi="x86_64", host_runtime=True, has_opencl=True)
        target = target_for(facts, DeviceKind.OPENCL)
        with pytest.raises(SpecError, match=r"limit of 256 \(assumed"):
            build_gemm(params, target, CompileCache(tmp_path))

    def test_vulkan_work_group_over_256_threads_is_refused(self, tmp_path: Path) -> None:
        """Vulkan runs the same bn x bn work-groups, so bn=32 is refused there too."""
        params = GemmParams(n=64, bn=32, device=DeviceKind.VULKAN)
        with pytest.raises(SpecError) as caught:
            build_gemm(params, {"kind": "vulkan"}, CompileCache(tmp_path))
        assert caught.value.field == "params.bn"

    def test_opencl_build_is_cached_as_a_library(self, tmp_path: Path) -> None:
        """An OpenCL GEMM for a host-linked phone builds into one cached .so."""
        facts = DeviceFacts(abi="x86_64", host_runtime=True, has_opencl=True)
        params = GemmParams(n=64, bn=16, device=DeviceKind.OPENCL)
        cache = CompileCache(tmp_path)
        path = build_gemm(params, target_for(facts, DeviceKind.OPENCL), cache)
        assert path.is_file()
        assert cache.entries() == [path]


class TestNaiveSchedule:
    def test_naive_kernel_is_the_unscheduled_compute_and_is_correct(self, tmp_path: Path) -> None:
        """naive builds the seeds' te.compute as written: no parallel or vector loop, right C."""
        params = GemmParams(n=64, schedule=GemmSchedule.NAIVE)
        host = target_for(DeviceFacts(abi="x86_64", host_runtime=True))
        library = build_gemm(params, host, CompileCache(tmp_path))
        lib = tvm.runtime.load_module(str(library))
        rng = np.random.default_rng(0)
        a_np, b_np = rng.random((64, 64), "float32"), rng.random((64, 64), "float32")
        dev = tvm.cpu()
        a, b = tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev)
        c = tvm.runtime.tensor(np.zeros((64, 64), "float32"), dev)
        lib["gemm"](a, b, c)
        np.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4)
        script = gemm_module(64, "float32").script()
        assert "T.parallel" not in script and "T.vectorized" not in script

    def test_naive_and_tiled_are_cached_apart(self) -> None:
        """The schedule is part of the compile cache key: one never runs as the other."""
        target = target_for(DeviceFacts(abi="x86_64", host_runtime=True))
        naive = cache_key(GemmParams(n=64, schedule=GemmSchedule.NAIVE), target)
        tiled = cache_key(GemmParams(n=64), target)
        assert naive.schedule != tiled.schedule

    def test_naive_on_a_gpu_is_refused(self, tmp_path: Path) -> None:
        """A GPU kernel needs its loops bound to threads, so naive is CPU only."""
        facts = DeviceFacts(abi="x86_64", host_runtime=True, has_opencl=True)
        params = GemmParams(n=64, device=DeviceKind.OPENCL, schedule=GemmSchedule.NAIVE)
        with pytest.raises(SpecError) as info:
            build_gemm(params, target_for(facts, DeviceKind.OPENCL), CompileCache(tmp_path))
        assert info.value.field == "params.schedule"
