"""A second device kind, registered as a test double, runs through the fleet without Android code.

The double (:class:`HostBoard`) implements
:class:`~farm.controllers.base.DeviceController` for "boards" that are this
host: its server is a real ``tvm.exec.rpc_server`` registered at a real
tracker under the board's key, so the fleet manager's registration wait, its
sweeps, verdicts and recovery ladder all run for real; the manager has no adb
client at all.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from farm.clock import SystemClock, wait_until
from farm.config import JobSettings, Settings
from farm.controllers import (
    ControllerContext,
    DeviceController,
    Discovered,
    HealthReading,
    RecoveryStep,
    TargetSpec,
    ThermalReading,
    controller_for,
    kinds,
    register,
    unregister,
)
from farm.controllers.android import AndroidController
from farm.errors import ConfigError
from farm.fleet.manager import FleetManager, FleetOptions
from farm.health.sample import HealthSample
from farm.kinds import LeaseByKind
from farm.netaddr import free_port
from farm.procs import signal_group, spawn
from farm.queue import Store
from farm.queue.models import DeviceState
from farm.queue.scheduler import plan
from farm.tvm.tracker import TrackerProcess

KIND = "hostboard"
READY_DEADLINE_S = 120.0  # a TVM import per server start, on a loaded 2-core host


class HostBoard:
    """A test double of a board kind: devices are names, servers real rpc_servers on loopback."""

    kind = KIND

    def __init__(self, tracker: tuple[str, int], names: list[str]) -> None:
        self.tracker = tracker
        self.states = {f"{KIND}-{name}": "device" for name in names}
        self.temp_c: dict[str, float] = {}
        self.servers: dict[str, subprocess.Popen[bytes]] = {}
        self.starts: list[str] = []
        self.keys: dict[str, str] = {}
        self._lock = threading.Lock()

    def discover(self) -> list[Discovered]:
        return [Discovered(serial, state) for serial, state in self.states.items()]

    def facts(self, serial: str) -> dict[str, Any]:
        return {"serial": serial, "abi": "x86_64", "abis": ["x86_64"], "model": "HostBoard",
                "soc": "host", "num_cores": 1, "host_runtime": True}

    def read_health(self, serial: str, at: datetime, *,
                    registered: bool | None = None) -> HealthReading:
        server = self.servers.get(serial)
        return HealthSample(serial=serial, at=at, adb_state=self.states[serial],
                            app_running=server is not None and server.poll() is None,
                            registered=registered, max_zone_temp_c=self.temp_c.get(serial))

    def start_server(self, serial: str) -> None:
        self.stop_server(serial)
        host, port = self.tracker
        own = free_port()
        argv = [sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1",
                "--port", str(own), "--port-end", str(own + 1),
                "--tracker", f"{host}:{port}",
                "--key", self.keys.get(serial) or self.tracker_key(serial)]
        with self._lock:
            self.servers[serial] = spawn(argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.starts.append(serial)

    def serve(self, serial: str, key: str) -> None:
        self.keys[serial] = key
        self.start_server(serial)

    def stop_server(self, serial: str) -> None:
        with self._lock:
            server = self.servers.pop(serial, None)
        if server is not None:
            signal_group(server.pid, signal.SIGKILL)
            server.wait()

    def kill_server(self, serial: str) -> None:
        """Fault injection: the server dies; the board does not know."""
        server = self.servers[serial]
        signal_group(server.pid, signal.SIGKILL)
        server.wait()

    def recovery_steps(self, serial: str) -> list[RecoveryStep]:
        return [RecoveryStep("restart_app", lambda: self.start_server(serial))]

    def compile_target(self, facts: Mapping[str, Any], device: str = "cpu") -> TargetSpec:
        return TargetSpec({"kind": "llvm"}, {"kind": "llvm"})

    def gating_reading(self, serial: str, at: datetime) -> ThermalReading:
        return self.read_health(serial, at)

    def tracker_key(self, serial: str) -> str:
        return f"test-{serial}"


class TestRegistry:
    """The registry of device kinds."""

    def test_android_is_registered(self) -> None:
        """Phones are a registered kind out of the box."""
        assert "android" in kinds()

    def test_register_and_build(self) -> None:
        """A registered factory builds the kind's controller, which meets the protocol."""
        register(KIND, lambda context: HostBoard(("127.0.0.1", 1), ["a"]))
        try:
            assert KIND in kinds()
            controller = controller_for(KIND, ControllerContext())
            assert isinstance(controller, DeviceController)
            assert controller.kind == KIND
        finally:
            unregister(KIND)
        assert KIND not in kinds()

    def test_unknown_kind_names_the_known(self) -> None:
        """Asking for an unregistered kind is a ConfigError listing the registered ones."""
        with pytest.raises(ConfigError, match=r"unknown device kind 'toaster'.*android"):
            controller_for("toaster")

    @pytest.mark.parametrize("name", ["", "any", "Board!", "x" * 17])
    def test_bad_names_are_refused(self, name: str) -> None:
        """A kind name must fit ``devices.kind`` and not be the wildcard."""
        with pytest.raises(ConfigError):
            register(name, lambda context: HostBoard(("127.0.0.1", 1), []))


class TestFleetWithASecondKind:
    """The fleet manager provisions, sweeps, schedules and heals a kind known by protocol only."""

    @pytest.fixture
    def fleet(self, store: Store, tmp_path: Path) -> Iterator[tuple[FleetManager, HostBoard]]:
        with TrackerProcess.start(log_path=tmp_path / "tracker.log") as tracker:
            settings = Settings.model_validate({
                "data_dir": str(tmp_path), "tracker": {"port": tracker.port},
                "supervise": {"backoff_base_s": 0.1},
            })
            options = replace(FleetOptions.from_settings(settings), probe_every_sweeps=0)
            boards = HostBoard(("127.0.0.1", tracker.port), ["a", "b"])
            manager = FleetManager(options, AndroidController(options), store, SystemClock(),
                                   controllers={KIND: boards})
            try:
                yield manager, boards
            finally:
                manager.close()
                for serial in list(boards.servers):
                    boards.stop_server(serial)

    def wait_ready(self, manager: FleetManager, serials: list[str]) -> None:
        def ready() -> bool:
            manager.sweep()
            return all(manager.state(s) is DeviceState.READY for s in serials)

        assert wait_until(ready, READY_DEADLINE_S, interval_s=0.5), \
            {s: manager.state(s) for s in serials}

    def test_boards_reach_ready_get_jobs_of_their_kind_and_come_back(
        self, fleet: tuple[FleetManager, HostBoard], store: Store
    ) -> None:
        """Discovered by a sweep, boards reach ready with their facts and kind, take only jobs
        of their kind, and come back through the ladder after their server is killed."""
        manager, boards = fleet
        serials = sorted(boards.states)
        self.wait_ready(manager, serials)
        record = store.get_device(serials[0])
        assert record is not None and record.kind == KIND
        assert record.facts["model"] == "HostBoard"

        board_job = store.enqueue({"kind": "gemm", "params": {"n": 64},
                                   "devices": {"kind": KIND, "count": 2}}, manager.clock.now())
        phone_job = store.enqueue({"kind": "gemm", "params": {"n": 64},
                                   "devices": {"kind": "android"}}, manager.clock.now())
        leases = LeaseByKind(JobSettings())
        placed = {a.job_id: sorted(a.serials)
                  for a in plan(store.snapshot(), manager.clock.now(), lease_s_by_kind=leases)}
        assert placed == {board_job: serials}
        assert phone_job not in placed

        starts = len(boards.starts)
        boards.kill_server(serials[0])
        assert wait_until(lambda: (manager.sweep(), len(boards.starts) > starts)[1],
                          READY_DEADLINE_S, interval_s=0.5)
        self.wait_ready(manager, serials)
        assert "restart_app ok" in " ".join(e.reason for e in store.device_events(serials[0]))

    def test_unplugged_board_goes_offline(self, fleet: tuple[FleetManager, HostBoard]) -> None:
        """A board its controller no longer lists is offline after the next sweep."""
        manager, boards = fleet
        serial = sorted(boards.states)[0]
        self.wait_ready(manager, [serial])
        del boards.states[serial]
        manager.sweep()
        assert manager.state(serial) is DeviceState.OFFLINE
