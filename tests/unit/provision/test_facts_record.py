"""The stored facts record carries the keys the scheduler and the runner read."""

from __future__ import annotations

import dataclasses

from farm.device.facts import DeviceFacts
from farm.provision.facts import facts_record
from farm.queue.models import DeviceState
from farm.queue.scheduler import DeviceView, matches
from farm.queue.spec import DeviceSelection

FACTS = DeviceFacts(
    serial="s1", model="Pixel 8", manufacturer="Google", soc="Tensor G3", abi="arm64-v8a",
    abilist=("arm64-v8a",), sdk=34, release="14", fingerprint="f", debuggable=False, cores=9,
    big_core_mask=0x100, mem_total_kb=8_000_000, opencl=True, vulkan=True, gpu_egl="mali",
    gpu_vendor="arm",
)


class TestFactsRecord:
    def test_keys_for_the_runner(self) -> None:
        """GPU APIs and cores are stored under the runner's names."""
        record = facts_record(FACTS)
        assert record["has_opencl"] is True and record["num_cores"] == 9
        assert record["abis"] == ["arm64-v8a"] and record["gpu"] == "mali arm"

    def test_gpu_of_unknown_vendor_is_named_once(self) -> None:
        """An EGL name with no known vendor is stored once; no GPU stores ""."""
        odd = dataclasses.replace(FACTS, gpu_egl="emulation", gpu_vendor="emulation")
        assert facts_record(odd)["gpu"] == "emulation"
        assert facts_record(dataclasses.replace(FACTS, gpu_egl="", gpu_vendor=""))["gpu"] == ""

    def test_scheduler_selection_matches(self) -> None:
        """A selection by ABI, SoC, SDK and GPU family matches the stored record."""
        selection = DeviceSelection(abi="arm64-v8a", soc="tensor g3", sdk_min=33, gpu="mali")
        phone = DeviceView("s1", DeviceState.READY, facts=facts_record(FACTS))
        assert matches(selection, phone)
        assert not matches(DeviceSelection(gpu="adreno"), phone)
