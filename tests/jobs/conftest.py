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
    return DeviceFacts(abi="x86_64", host_runtime=True, num_cores=2)


@pytest.fixture
def small_cnn(tmp_path: Path) -> Path:
    """A small real CNN saved as ONNX in tmp_path."""
    return write_small_cnn(tmp_path / "small_cnn.onnx")


@pytest.fixture(scope="session")
def tuned_cnn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The small CNN and a MetaSchedule database folder covering every one of its tasks.

    Each task's record is the first schedule of MetaSchedule's own design space
    for the host target (multi-level tiling, parallel, vectorize, unroll), with a
    made-up run time: a tuning run without the hours of measuring. Built once per
    session. ``TuneContext`` imports MetaSchedule's tensor intrinsics: imported
    first the fast way (farm.jobs.tvmscript), seconds instead of minutes
    inside pytest on 2 cores.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from farm.jobs.model import load_model, relax_module, tunable_module
    from farm.jobs.targets import target_for
    from farm.jobs.tvmscript import import_light

    import_light()

    root = tmp_path_factory.mktemp("tuned_cnn")
    model_path = write_small_cnn(root / "small_cnn.onnx")
    model, inputs = load_model(model_path)
    facts = DeviceFacts(abi="x86_64", host_runtime=True, num_cores=2)
    target = tvm.target.Target(target_for(facts))
    tasks = ms.relax_integration.extract_tasks(
        tunable_module(relax_module(model, inputs), target), target
    )
    database_dir = root / "database"
    database_dir.mkdir()
    database = ms.database.JSONDatabase(work_dir=str(database_dir))
    for task in tasks:
        mod = task.dispatched[0]
        context = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                                 task_name=task.task_name, rand_state=1)
        schedule = context.generate_design_space()[0]
        (func,) = mod.functions.values()
        database.commit_tuning_record(ms.database.TuningRecord(
            schedule.trace, database.commit_workload(mod), [1e-3], target,
            ms.arg_info.ArgInfo.from_prim_func(func),
        ))
    return model_path, database_dir
