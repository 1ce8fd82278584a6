"""Fixtures for the jobs' tests: a real TVM tracker and RPC servers on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.demo_model import write_small_cnn
from farm.jobs.local_cluster import LocalCluster
from farm.jobs.params import DeviceFacts, TrackerParams

#: The tracker key the shared servers register under, like a virtual phone's.
KEY = "jobs-test"


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """One tracker and two RPC servers under ``KEY``, killed (process groups) at the end."""
    local = LocalCluster()
    try:
        local.start_tracker()
        local.add_servers(KEY, count=2)
        yield local
    finally:
        local.close()


@pytest.fixture
def tracker(cluster: LocalCluster) -> TrackerParams:
    """Tracker parameters that reach the shared servers."""
    return TrackerParams(
        host=cluster.host,
        port=cluster.port,
        key=KEY,
        session_timeout_s=120,
        serial="local-rpc",
        connect_timeout_s=60,
    )


@pytest.fixture
def host_facts() -> DeviceFacts:
    """Facts of a phone that runs host code (what the virtual phones report)."""
    return DeviceFacts(abi="x86_64", num_cores=2)


@pytest.fixture
def small_cnn(tmp_path: Path) -> Path:
    """A small real CNN saved as ONNX in tmp_path."""
    return write_small_cnn(tmp_path / "small_cnn.onnx")
