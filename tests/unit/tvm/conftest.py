"""Fixtures for farm/tvm tests: a real tracker, an event loop thread, virtual RPC apps."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from farm.tvm.testing import LoopThread
from farm.tvm.tracker import TrackerProcess
from farm.virtual.contracts import NetworkMode
from farm.virtual.net import Net, parse_tcp_spec
from farm.virtual.rpc_process import RpcProcess

_keys = itertools.count()


async def tcp_opener(host_spec: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """What the adb server does for a reverse tunnel on the host: a real TCP connect."""
    return await asyncio.open_connection("127.0.0.1", parse_tcp_spec(host_spec))


@pytest.fixture(scope="session")
def tracker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrackerProcess]:
    """One real tvm.exec.rpc_tracker for the tvm tests (tests use distinct keys)."""
    log_path = tmp_path_factory.mktemp("tracker") / "tracker.log"
    with TrackerProcess.start(log_path=log_path) as process:
        yield process


@pytest.fixture
def key() -> str:
    """A tracker key no other test uses."""
    return f"test{next(_keys)}"


@pytest.fixture
def aloop() -> Iterator[LoopThread]:
    """An event loop in a thread, for the phones' networks."""
    runner = LoopThread()
    yield runner
    runner.close()


class Phones:
    """Starts virtual RPC apps on their own Nets and ends them all at teardown."""

    def __init__(self, aloop: LoopThread, tmp_path: Path) -> None:
        self.aloop = aloop
        self.tmp_path = tmp_path
        self.started: list[tuple[Net, RpcProcess]] = []

    def start(
        self,
        mode: NetworkMode,
        tracker_host: str,
        tracker_port: int,
        key: str,
        prepare: Callable[[Net], None] = lambda net: None,
    ) -> tuple[Net, RpcProcess]:
        """A Net in ``mode`` (``prepare`` runs first, e.g. to add reverse tunnels) and its app."""
        net = Net(mode, tcp_opener)
        prepare(net)
        index = len(self.started)

        async def start() -> RpcProcess:
            return await RpcProcess.start(
                net=net,
                tracker_host=tracker_host,
                tracker_port=tracker_port,
                key=key,
                log_path=self.tmp_path / f"rpc{index}.log",
                work_dir=self.tmp_path / f"work{index}",
            )

        process = self.aloop.run(start())
        self.started.append((net, process))
        return net, process

    def stop_all(self) -> None:
        """Kill every app process group and close every Net."""
        for net, process in self.started:
            self.aloop.run(process.stop())
            self.aloop.run(net.close())


@pytest.fixture
def phones(aloop: LoopThread, tmp_path: Path) -> Iterator[Phones]:
    """Factory of virtual RPC apps, all stopped at teardown."""
    factory = Phones(aloop, tmp_path)
    yield factory
    factory.stop_all()
