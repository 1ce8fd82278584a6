"""Fixtures for the jobs' tests: a real TVM tracker and RPC servers on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

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


def _small_cnn(path: Path) -> Path:
    """Write a small CNN (conv, depthwise conv, relu, max/avg pooling, gemm, matmul) to ``path``.

    Weights come from a seeded generator, so the file is the same on every run. Saved
    with ir_version=9 because onnxruntime rejects IR versions above what it knows.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    initializers = [
        weight("conv1_w", (8, 3, 3, 3)),
        weight("conv1_b", (8,)),
        weight("dw_w", (8, 1, 3, 3)),
        weight("dw_b", (8,)),
        weight("fc1_w", (8 * 4 * 4, 16)),
        weight("fc1_b", (16,)),
        weight("fc2_w", (16, 10)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv1_w", "conv1_b"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "dw_w", "dw_b"], ["c2"], pads=[1, 1, 1, 1], group=8),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("AveragePool", ["p1"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"]),
        helper.make_node("Gemm", ["f", "fc1_w", "fc1_b"], ["g1"]),
        helper.make_node("Relu", ["g1"], ["r3"]),
        helper.make_node("MatMul", ["r3", "fc2_w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.fixture
def small_cnn(tmp_path: Path) -> Path:
    """A small real CNN saved as ONNX in tmp_path."""
    return _small_cnn(tmp_path / "small_cnn.onnx")
