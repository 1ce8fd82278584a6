"""Tests for farm.tvm.probe: real sessions through the tracker, with a hard deadline."""

from __future__ import annotations

import os
import signal
import time

import pytest

from farm.clock import wait_until
from farm.device.facts import gpu_limits_from
from farm.errors import NoFreeServer, SessionError, TrackerUnreachable
from farm.tvm.probe import probe_session, read_gpu_limits
from farm.tvm.tracker import TrackerProcess, free_port, summary


def registered(tracker: TrackerProcess, key: str) -> bool:
    """Whether the tracker lists a server for ``key``."""
    return bool(summary("127.0.0.1", tracker.port).servers_for(key))


def free(tracker: TrackerProcess, key: str) -> bool:
    """Whether the tracker holds a free match key for ``key``: a request gets a ticket.

    A server sends its info (what ``servers_for`` lists) before it puts its
    match key (``rpc/server.py``'s listen loop, apache/tvm): one stopped
    between the two is listed but gives no ticket.
    """
    return summary("127.0.0.1", tracker.port).queue(key).free > 0


class TestProbeSession:
    def test_live_phone_passes(self, tracker: TrackerProcess, phones, key: str) -> None:
        """A registered lan app serves a real session and the data round trip."""
        _, app = phones.start("lan", "10.0.2.2", tracker.port, key)
        assert wait_until(lambda: registered(tracker, key), 30)
        result = probe_session("127.0.0.1", tracker.port, key, timeout_s=30)
        assert (result.server_host, result.server_port) == ("127.0.0.1", app.device_port)
        assert result.roundtrip_ms > 0

    def test_frozen_phone_fails_within_deadline(
        self, tracker: TrackerProcess, phones, key: str
    ) -> None:
        """A SIGSTOPped app stays listed, and the probe fails by its deadline."""
        _, app = phones.start("lan", "10.0.2.2", tracker.port, key)
        assert wait_until(lambda: free(tracker, key), 30)
        os.killpg(app.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(SessionError) as info:
            probe_session("127.0.0.1", tracker.port, key, timeout_s=4)
        assert time.monotonic() - started < 6
        assert f"127.0.0.1:{app.device_port}" in str(info.value)
        assert registered(tracker, key)

    def test_no_server_for_key(self, tracker: TrackerProcess, key: str) -> None:
        """With nobody registered under the key the probe fails with a clear reason."""
        with pytest.raises(SessionError, match="no server for key") as info:
            probe_session("127.0.0.1", tracker.port, key, timeout_s=3)
        assert isinstance(info.value, NoFreeServer)  # no verdict on any one phone

    def test_unreachable_tracker(self) -> None:
        """A tracker that refuses is an infrastructure fault, not a phone fault."""
        with pytest.raises(TrackerUnreachable):
            probe_session("127.0.0.1", free_port(), "android", timeout_s=20)


class TestReadGpuLimits:
    def test_virtual_phone_has_no_gpu(self, tracker: TrackerProcess, phones, key: str) -> None:
        """The virtual phone's runtime (TVM's PyPI wheel) has no OpenCL or Vulkan: no entry."""
        phones.start("lan", "10.0.2.2", tracker.port, key)
        assert wait_until(lambda: registered(tracker, key), 30)
        assert read_gpu_limits("127.0.0.1", tracker.port, key, 30, "VIRT1") == {}
        # The session ended: the phone serves the next one.
        assert probe_session("127.0.0.1", tracker.port, key, timeout_s=30).roundtrip_ms > 0

    def test_no_server_names_the_phone(self, tracker: TrackerProcess, key: str) -> None:
        """With nobody under the key the read fails by its deadline, naming the serial."""
        started = time.monotonic()
        with pytest.raises(NoFreeServer, match=r"\[VIRT2\] .*no server for key"):
            read_gpu_limits("127.0.0.1", tracker.port, key, 3, "VIRT2")
        assert time.monotonic() - started < 6

    def test_unreachable_tracker(self) -> None:
        """A tracker that refuses is an infrastructure fault, not the phone's."""
        with pytest.raises(TrackerUnreachable):
            read_gpu_limits("127.0.0.1", free_port(), "android", 20, "VIRT3")


class TestGpuLimitsRecord:
    def test_readings_become_the_facts_record(self) -> None:
        """An Adreno's readings are kept as facts["gpu_limits"]["opencl"], ints only."""
        readings = {"opencl": {"max_threads_per_block": 1024, "warp_size": 1,
                               "max_shared_memory_per_block": 32768,
                               "multi_processor_count": 2}}
        assert gpu_limits_from(readings) == readings

    def test_unsound_values_are_dropped(self) -> None:
        """None, zero, negative, bool, float and text values, unknown APIs and names go."""
        readings = {
            "opencl": {"max_threads_per_block": 512, "warp_size": None,
                       "max_shared_memory_per_block": 0, "multi_processor_count": True,
                       "max_clock_rate": 900},
            "vulkan": {"max_threads_per_block": 256.0, "warp_size": 64},
            "cuda": {"max_threads_per_block": 1024},
            "metal": "yes",
        }
        assert gpu_limits_from(readings) == {"opencl": {"max_threads_per_block": 512}}

    def test_an_api_without_a_work_group_size_is_no_api(self) -> None:
        """An API that reports no max_threads_per_block gets no entry at all."""
        assert gpu_limits_from({"vulkan": {"warp_size": 32}}) == {}
        assert gpu_limits_from({}) == {}

    def test_a_malformed_stored_record_reads_as_no_limits(self) -> None:
        """A record that is not a mapping (a foreign or damaged facts row) means no limits."""
        assert gpu_limits_from(None) == {}
        assert gpu_limits_from([1024]) == {}
        assert gpu_limits_from({"opencl": [1024]}) == {}
