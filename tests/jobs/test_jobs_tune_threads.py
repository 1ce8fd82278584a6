"""Candidates are timed with the job's thread pool, as its untuned and tuned timings are.

MetaSchedule times every candidate in a new RPC session, which starts with the
runtime's default pool: one thread per core of the host, each pinned to its core.
The job's own timings set the pool first (``ThreadPoolParams``). On a 64-core
host with the phone's process on one core, the default pool ran each candidate's
parallel loops on 64 busy cores, convolutions timed 30x slower in multiples of
the scheduler tick, and the pick check kept none of 34 searched picks
(docs/benchmarks.md). On a phone the default pool spans the little cores too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from farm.jobs.params import ModelParams, ThreadPoolParams, TrackerParams, TuneParams
from farm.jobs.session import ThreadPoolSession
from farm.tuning.rounds import builder_and_runner
from farm.virtual.testing import rpc_app


def _pool_threads(app: Any, create: Callable[[Any], Any]) -> int:
    """The threads a session's pool runs parallel loops on (``runtime.NumThreads``)."""
    from tvm.s_tir import meta_schedule as ms

    config = ms.runner.RPCConfig(tracker_host=app.tracker_host, tracker_port=app.tracker_port,
                                 tracker_key=app.key, session_timeout_sec=60)
    session = create(config)
    try:
        return int(session.get_function("runtime.NumThreads")())
    finally:
        del session


def test_a_candidate_session_runs_the_thread_count_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session MetaSchedule opens through ThreadPoolSession runs fewer threads than the default.

    The runtime's default pool on x86 is half the host's hardware threads (it
    assumes hyper-threading: apache/tvm ``src/runtime/threading_backend.cc``,
    ``MaxConcurrency``), one thread on this 2-core CI host; the phone gets the
    default of a 6-thread host through ``TVM_NUM_THREADS``, which the runtime
    reads first (capped at the cores the phone may use: 2 here).
    """
    monkeypatch.setenv("TVM_NUM_THREADS", "3")  # the phone's process inherits it
    with rpc_app(tmp_path, key="threads") as app:
        default = _pool_threads(app, lambda config: config.connect_server())
        one = _pool_threads(app, ThreadPoolSession(affinity_mode=0, num_threads=1))
    assert one == 1 < default, (one, default)


def test_the_runner_times_candidates_with_the_model_jobs_threads(tmp_path: Path) -> None:
    """builder_and_runner hands the model's ``threads`` to every candidate's session."""
    threads = ThreadPoolParams(affinity_mode=1, num_threads=2)
    model = ModelParams(tmp_path / "m.onnx", {}, threads=threads)
    params = TuneParams(gemm=None, model=model, trials=1, work_dir=tmp_path)
    _, runner = builder_and_runner(params, TrackerParams("127.0.0.1", 9, "k"), linker=None)  # type: ignore[arg-type]
    assert runner.f_create_session == ThreadPoolSession(affinity_mode=1, num_threads=2)
    # At the defaults a user gets (big cores, one thread per core), candidates run so too.
    defaults = TuneParams(gemm=None, model=ModelParams(tmp_path / "m.onnx", {}), trials=1,
                          work_dir=tmp_path)
    _, runner = builder_and_runner(defaults, TrackerParams("127.0.0.1", 9, "k"), linker=None)  # type: ignore[arg-type]
    assert runner.f_create_session == ThreadPoolSession(ThreadPoolParams().affinity_mode,
                                                        ThreadPoolParams().num_threads)
