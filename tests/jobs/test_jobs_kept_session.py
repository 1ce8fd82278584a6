"""A runner worker keeps its RPC session across candidates (farm.tuning.kept_session)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from farm.clock import wait_until
from farm.errors import SessionError
from farm.jobs.local_cluster import LocalCluster
from farm.jobs.session import ThreadPoolSession
from farm.tuning import kept_session
from farm.tuning.kept_session import KeptSession, kept_cleanup
from farm.tuning.rate import TimedUpload

KEY = "kept-session-test"


@pytest.fixture
def fresh_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker process that has kept no session yet."""
    monkeypatch.setattr(kept_session, "_KEPT", kept_session._Kept())


@pytest.fixture
def phone(cluster: LocalCluster) -> str:
    """One RPC server of its own key (added once to the shared tracker)."""
    if cluster.free_servers(KEY) == 0 and KEY not in cluster.servers:
        cluster.add_servers(KEY, count=1)
    assert wait_until(lambda: cluster.free_servers(KEY) == 1, 30.0, interval_s=0.05)
    return KEY


def _rpc_config(cluster: LocalCluster, key: str, timeout_s: int = 120) -> Any:
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.RPCConfig(tracker_host=cluster.host, tracker_port=cluster.port,
                               tracker_key=key, session_timeout_sec=timeout_s)


def _library(folder: Path, factor: float) -> str:
    """``B = A * factor`` (64 floats) built as ``<folder>/tvm_tmp_mod.so``, as a candidate is."""
    import tvm
    from tvm import te

    a = te.placeholder((64,), name="A")
    b = te.compute((64,), lambda i: a[i] * factor, name="B")
    folder.mkdir()
    path = folder / "tvm_tmp_mod.so"
    tvm.compile(te.create_prim_func([a, b]), target="llvm").export_library(str(path))
    return str(path)


def _run(session: Any, module: Any) -> np.ndarray:
    import tvm

    dev = session.cpu()
    a = tvm.runtime.tensor(np.ones(64, "float32"), dev)
    b = tvm.runtime.tensor(np.zeros(64, "float32"), dev)
    module[module.entry_name](a, b)
    return b.numpy()


@pytest.mark.usefixtures("fresh_worker")
def test_candidates_share_one_session_each_library_its_own_and_idle_frees_the_phone(
        tmp_path: Path, cluster: LocalCluster, phone: str) -> None:
    """Two candidates whose libraries have the same file name run in one session, each its
    own code (the first still loaded); the phone is held while kept and free once idle."""
    create = KeptSession(ThreadPoolSession(0, 1))
    upload = TimedUpload(str(tmp_path / "uploads.jsonl"))
    config = _rpc_config(cluster, phone)

    first = create(config)
    doubled = upload(first, _library(tmp_path / "farm-ms-1", 2.0), "tvm_tmp_mod.so")
    assert _run(first, doubled)[0] == 2.0
    kept_cleanup(first, "tvm_tmp_mod.so")
    assert cluster.free_servers(phone) == 0  # held between candidates

    second = create(config)
    assert second is first
    tripled = upload(second, _library(tmp_path / "farm-ms-2", 3.0), "tvm_tmp_mod.so")
    assert _run(second, tripled)[0] == 3.0
    assert _run(first, doubled)[0] == 2.0
    kept_cleanup(second, "tvm_tmp_mod.so")

    del first, second, doubled, tripled
    assert wait_until(lambda: cluster.free_servers(phone) == 1, 30.0, interval_s=0.05), \
        "the idle session still holds the phone"


@pytest.mark.usefixtures("fresh_worker")
def test_a_tune_runner_at_the_defaults_keeps_its_session(
        tmp_path: Path, cluster: LocalCluster, phone: str) -> None:
    """The runner a tune builds (``TuneParams`` as a job gets them) keeps the session its
    candidates ran in: the phone stays held after the batch and is free again once idle."""
    from tvm.s_tir import meta_schedule as ms

    from farm.jobs.ndk import Linker
    from farm.jobs.params import TrackerParams, TuneParams
    from farm.jobs.session import open_session
    from farm.tuning.rounds import builder_and_runner

    tracker = TrackerParams(host=cluster.host, port=cluster.port, key=phone)
    builder, runner = builder_and_runner(TuneParams(gemm=None, trials=3, work_dir=tmp_path),
                                         tracker, Linker(), warm=True)
    try:
        args = [ms.arg_info.TensorInfo("float32", [64])] * 2
        inputs = [ms.runner.RunnerInput(_library(tmp_path / f"farm-ms-{n}", n), "cpu", args)
                  for n in (2.0, 3.0, 4.0)]
        results = [future.result() for future in runner.run(inputs)]
        assert [r.error_msg for r in results] == [None] * 3
        # Held by the runner's worker for the next batch (a session per candidate would
        # leave the phone free for this request within its second).
        with pytest.raises(SessionError, match="no server"):
            open_session(replace(tracker, connect_timeout_s=1.0))
        assert wait_until(lambda: cluster.free_servers(phone) == 1, 30.0, interval_s=0.05), \
            "the runner's idle session still holds the phone"
    finally:
        builder.shutdown()


@dataclass
class _Session:
    """Stands in for an RPC session; ``dead`` makes its round trip fail."""

    number: int
    dead: bool = False

    def get_function(self, _name: str) -> Any:
        if self.dead:
            raise RuntimeError("connection reset")
        return lambda *args: 1


@dataclass
class _Config:
    """MetaSchedule's RPCConfig as far as a kept session reads it."""

    tracker_key: str = "phone-a"
    tracker_host: str = "127.0.0.1"
    tracker_port: int = 9190
    session_timeout_sec: int = 600


@pytest.mark.usefixtures("fresh_worker")
class TestWhenANewSession:
    @staticmethod
    def _create(opened: list[_Session]) -> KeptSession:
        numbers = itertools.count()

        def create(_config: Any) -> _Session:
            opened.append(_Session(next(numbers)))
            return opened[-1]

        return KeptSession(create, idle_s=60.0)

    def test_a_dead_session_is_replaced(self) -> None:
        """The app restarted or a candidate crashed its server: the next candidate gets a new
        session instead of failing on the dead one."""
        opened: list[_Session] = []
        create = self._create(opened)
        first = create(_Config())
        kept_cleanup(first, None)
        first.dead = True
        second = create(_Config())
        assert second is not first and len(opened) == 2

    def test_another_tracker_key_gets_its_own(self) -> None:
        opened: list[_Session] = []
        create = self._create(opened)
        first = create(_Config())
        kept_cleanup(first, None)
        assert create(_Config(tracker_key="phone-b")) is not first

    def test_a_session_past_half_its_timeout_is_replaced(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Before the server's session timeout could end it under a candidate's run."""
        opened: list[_Session] = []
        create = self._create(opened)
        first = create(_Config(session_timeout_sec=600))
        kept_cleanup(first, None)
        assert create(_Config(session_timeout_sec=600)) is first
        kept_cleanup(first, None)
        monkeypatch.setattr(kept_session._KEPT, "opened", kept_session._KEPT.opened - 301.0)
        assert create(_Config(session_timeout_sec=600)) is not first
