"""Targets from device facts, in TVM 0.27's dict form."""

from __future__ import annotations

from pathlib import Path

import pytest
import tvm

from farm.errors import PhoneFault, SpecError
from farm.jobs.params import DeviceFacts, DeviceKind
from farm.jobs.targets import (
    host_vector_features,
    needs_ndk,
    opencl_device,
    runtime_device_name,
    shared_target,
    target_for,
    work_group_limit,
)
from farm.kinds.run import device_facts


class TestTargetFor:
    def test_arm64_maps_to_the_android_triple_with_neon(self) -> None:
        """arm64-v8a compiles for aarch64-linux-android with NEON and the known core count."""
        target = target_for(DeviceFacts(abi="arm64-v8a", num_cores=8))
        assert target == {
            "kind": "llvm",
            "mtriple": "aarch64-linux-android",
            "mattr": ["+neon"],
            "num-cores": 8,
        }

    def test_known_cpu_features_are_added_once(self) -> None:
        """Extra features join the default ones without duplicates."""
        facts = DeviceFacts(abi="arm64-v8a", cpu_features=("+neon", "+dotprod"))
        assert target_for(facts)["mattr"] == ["+neon", "+dotprod"]

    def test_armv7_maps_to_androideabi(self) -> None:
        """armeabi-v7a compiles for armv7a-linux-androideabi."""
        assert target_for(DeviceFacts(abi="armeabi-v7a"))["mtriple"] == "armv7a-linux-androideabi"

    def test_host_runtime_is_the_host(self) -> None:
        """A phone running host code (a virtual phone) gets the host's LLVM target, no NDK."""
        target = target_for(DeviceFacts(abi="x86_64", host_runtime=True))
        assert "mtriple" not in target
        assert not needs_ndk(target)

    def test_x86_64_android_is_not_the_host(self) -> None:
        """A real x86_64 Android device (an emulator) gets the Android triple and the NDK."""
        target = target_for(DeviceFacts(abi="x86_64", num_cores=4))
        assert target == {"kind": "llvm", "mtriple": "x86_64-linux-android", "num-cores": 4}
        assert needs_ndk(target)

    def test_x86_64_android_opencl_host_is_android(self) -> None:
        """A GPU target of an x86_64 Android device keeps the Android host triple."""
        target = target_for(DeviceFacts(abi="x86_64", has_opencl=True), DeviceKind.OPENCL)
        assert target["host"]["mtriple"] == "x86_64-linux-android"
        assert needs_ndk(target)

    def test_host_runtime_comes_from_stored_facts_only_when_true(self) -> None:
        """The stored fact must be exactly true; a missing fact means a real phone."""
        assert device_facts("S", {"abi": "x86_64", "host_runtime": True}).host_runtime
        assert not device_facts("S", {"abi": "x86_64"}).host_runtime
        assert not device_facts("S", {"abi": "x86_64", "host_runtime": "0"}).host_runtime

    def test_mali_opencl_sets_device_and_host(self) -> None:
        """A Mali GPU with OpenCL gets device=mali and the CPU target as host."""
        facts = DeviceFacts(abi="arm64-v8a", gpu="Mali-G710", has_opencl=True)
        target = target_for(facts, DeviceKind.OPENCL)
        assert target["device"] == "mali"
        assert target["host"]["mtriple"] == "aarch64-linux-android"
        assert needs_ndk(target)
        assert runtime_device_name(target) == "opencl"

    def test_vulkan_requires_the_driver(self) -> None:
        """Asking for Vulkan on a phone without it is the user's error naming the field."""
        with pytest.raises(SpecError) as info:
            target_for(DeviceFacts(abi="arm64-v8a"), DeviceKind.VULKAN)
        assert info.value.field == "params.device"

    def test_unknown_abi_is_refused(self) -> None:
        """An ABI farm cannot map is a SpecError on device.abi."""
        with pytest.raises(SpecError) as info:
            target_for(DeviceFacts(abi="mips"))
        assert info.value.field == "device.abi"

    @pytest.mark.parametrize(
        ("facts", "kind"),
        [
            (DeviceFacts(abi="arm64-v8a", num_cores=8), DeviceKind.CPU),
            (DeviceFacts(abi="armeabi-v7a"), DeviceKind.CPU),
            (DeviceFacts(abi="x86_64", num_cores=2, host_runtime=True), DeviceKind.CPU),
            (DeviceFacts(abi="x86_64", num_cores=2), DeviceKind.CPU),
            (DeviceFacts(abi="arm64-v8a", gpu="Mali-G78", has_opencl=True), DeviceKind.OPENCL),
            (
                DeviceFacts(abi="arm64-v8a", gpu="Adreno (TM) 740", has_opencl=True),
                DeviceKind.OPENCL,
            ),
            (DeviceFacts(abi="arm64-v8a", has_vulkan=True), DeviceKind.VULKAN),
        ],
    )
    def test_tvm_accepts_every_target(self, facts: DeviceFacts, kind: DeviceKind) -> None:
        """tvm.target.Target accepts each dict and keeps its kind."""
        target = tvm.target.Target(target_for(facts, kind))
        assert target.kind.name == target_for(facts, kind)["kind"]


class TestOpenclDevice:
    @pytest.mark.parametrize(
        ("gpu", "device"),
        [("Mali-G710", "mali"), ("Adreno (TM) 640", "adreno"), ("PowerVR Rogue GE8320", None)],
    )
    def test_gpu_names_map_to_tvm_devices(self, gpu: str, device: str | None) -> None:
        """Mali and Adreno have TVM OpenCL devices; other GPUs get the generic one."""
        assert opencl_device(gpu) == device


ADRENO_LIMITS = {"max_threads_per_block": 1024, "warp_size": 1,
                 "max_shared_memory_per_block": 32768, "multi_processor_count": 2}


class TestGpuLimits:
    def test_opencl_target_takes_the_phone_limits(self) -> None:
        """The phone's work-group size, warp size and local memory replace TVM's defaults."""
        facts = DeviceFacts(abi="arm64-v8a", gpu="adreno qualcomm", has_opencl=True,
                            gpu_limits={"opencl": ADRENO_LIMITS})
        target = target_for(facts, DeviceKind.OPENCL)
        attrs = tvm.target.Target(target).attrs
        assert attrs["max_threads_per_block"] == 1024
        assert attrs["max_num_threads"] == 1024
        assert attrs["thread_warp_size"] == 1
        assert attrs["max_shared_memory_per_block"] == 32768
        assert work_group_limit(target) == 1024

    def test_vulkan_target_takes_its_own_limits_not_opencl(self) -> None:
        """Each API's target reads that API's limits only."""
        facts = DeviceFacts(abi="arm64-v8a", has_opencl=True, has_vulkan=True,
                            gpu_limits={"opencl": ADRENO_LIMITS,
                                        "vulkan": {"max_threads_per_block": 512}})
        attrs = tvm.target.Target(target_for(facts, DeviceKind.VULKAN)).attrs
        assert attrs["max_threads_per_block"] == 512
        assert "max_shared_memory_per_block" not in attrs

    def test_without_limits_the_target_keeps_tvm_defaults(self) -> None:
        """A phone whose limits were not read gets no limit attributes and the assumed 256."""
        target = target_for(DeviceFacts(abi="arm64-v8a", has_opencl=True), DeviceKind.OPENCL)
        assert "max_threads_per_block" not in target
        assert work_group_limit(target) == 256

    def test_cpu_target_ignores_gpu_limits(self) -> None:
        """GPU limits never enter an LLVM target."""
        facts = DeviceFacts(abi="arm64-v8a", gpu_limits={"opencl": ADRENO_LIMITS})
        assert "max_threads_per_block" not in target_for(facts)

    def test_stored_facts_carry_the_limits_to_the_target(self) -> None:
        """The runner's view of stored facts keeps sound limits and drops the rest."""
        stored = {"abi": "arm64-v8a", "has_opencl": True,
                  "gpu_limits": {"opencl": {"max_threads_per_block": 1024, "warp_size": "x"},
                                 "cuda": {"max_threads_per_block": 1024}}}
        facts = device_facts("A", stored)
        assert facts.gpu_limits == {"opencl": {"max_threads_per_block": 1024}}
        assert target_for(facts, DeviceKind.OPENCL)["max_threads_per_block"] == 1024


class TestSharedTarget:
    def test_phones_of_one_kind_share_their_target(self) -> None:
        """Equal targets give that target."""
        target = target_for(DeviceFacts(abi="arm64-v8a", num_cores=8))
        assert shared_target({"A": target, "B": dict(target)}) == target

    def test_phones_that_differ_are_refused_naming_each_value(self) -> None:
        """A Pixel 8 and an SM-A525F differ in cores and GPU limits; the error says how."""
        pixel = target_for(DeviceFacts(abi="arm64-v8a", num_cores=9, has_opencl=True,
                                       gpu_limits={"opencl": {"max_threads_per_block": 1024}}),
                           DeviceKind.OPENCL)
        samsung = target_for(DeviceFacts(abi="arm64-v8a", num_cores=8, has_opencl=True),
                             DeviceKind.OPENCL)
        with pytest.raises(PhoneFault) as caught:
            shared_target({"PIXEL": pixel, "SAMSUNG": samsung})
        message = str(caught.value)
        assert caught.value.serial == "PIXEL,SAMSUNG"
        assert "host.num-cores: 9 on PIXEL, 8 on SAMSUNG" in message
        assert "max_threads_per_block: 1024 on PIXEL, unset on SAMSUNG" in message
        assert "mtriple" not in message


class TestHostVectorFeatures:
    def test_x86_flags_become_llvm_features(self, tmp_path: Path) -> None:
        """AVX2 and FMA in /proc/cpuinfo become +avx2 and +fma (LLVM's x86-64 lacks them)."""
        cpuinfo = tmp_path / "cpuinfo"
        cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n")
        assert host_vector_features(cpuinfo) == ["+avx", "+avx2", "+fma"]

    def test_no_flags_line_gives_none(self, tmp_path: Path) -> None:
        """An aarch64 host's cpuinfo (Features, no flags) adds nothing; NEON is its baseline."""
        cpuinfo = tmp_path / "cpuinfo"
        cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd\n")
        assert host_vector_features(cpuinfo) == []
        assert host_vector_features(tmp_path / "missing") == []
