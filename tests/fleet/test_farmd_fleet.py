"""farmd's fleet manager on virtual phones: provisioning, crashes, unplug, quarantine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from apk_tools.keys import create_pem_key
from apk_tools.prepare import prepare
from apk_tools.standin import build_standin_apk
from farm.adb import Adb, AdbServer, DeviceTracker
from farm.aio import LoopThread, wait_until
from farm.clock import SystemClock
from farm.fleet.manager import FleetManager, FleetOptions
from farm.queue.db import default_url
from farm.queue.models import DeviceState
from farm.queue.store import Store
from farm.supervise.ladder import LadderPolicy
from farm.tvm.tracker import TrackerProcess, summary
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet


@pytest.fixture(scope="module")
def signed_apk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("apk")
    key = create_pem_key(root / "k.pem", root / "k.crt", common_name="farm-test")
    return prepare(build_standin_apk(root / "unsigned", version_code=3), key, root / "signed")


@dataclass
class Farm:
    manager: FleetManager
    store: Store
    tracker: TrackerProcess
    adb: Adb

    def state(self, serial: str) -> DeviceState | None:
        record = self.store.get_device(serial)
        return record.state if record else None

    def wait_state(self, serials: list[str], state: DeviceState, deadline_s: float) -> None:
        ok = wait_until(lambda: all(self.state(s) is state for s in serials), deadline_s)
        assert ok, {s: self.state(s) for s in serials}

    def keys(self) -> set[str]:
        return {s.key for s in summary(*self.tracker_addr).servers}

    @property
    def tracker_addr(self) -> tuple[str, int]:
        return ("127.0.0.1", self.tracker.port)


@pytest.fixture
def make_farm(
    adb_server: AdbServerHandle, tmp_path: Path, signed_apk: Path
) -> Iterator[Callable[..., Farm]]:
    """Factory of a fleet manager wired as farmd wires it; everything ends after the test."""
    stops: list[Callable[[], None]] = []

    def make(**overrides: object) -> Farm:
        tracker = TrackerProcess.start(log_path=tmp_path / "tracker.log")
        stops.append(tracker.stop)
        store = Store(default_url(tmp_path))
        stops.append(store.close)
        loop = LoopThread()
        stops.append(loop.close)
        adb = Adb(AdbServer(port=adb_server.port))
        options = FleetOptions(tracker=("127.0.0.1", tracker.port), apk=signed_apk,
                               registration_deadline_s=40.0)
        options = replace(options, **overrides)  # type: ignore[arg-type]
        manager = FleetManager(options, adb, store, SystemClock(), loop)
        stops.append(manager.close)
        tracking = DeviceTracker(adb.server, manager.on_adb_state, debounce_s=0.3,
                                 reconcile_interval_s=2.0)
        tracking.start()
        stops.append(tracking.stop)
        return Farm(manager, store, tracker, adb)

    yield make
    for stop in reversed(stops):
        stop()


class TestProvisioning:
    def test_three_phones_come_to_ready(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm]
    ) -> None:
        """Three usb-only phones plugged in reach ready and are registered, untouched."""
        farm = make_farm()
        phones = make_fleet(3, network="usb-only")
        farm.wait_state(phones.serials, DeviceState.READY, 150)
        keys = farm.keys()
        for serial in phones.serials:
            assert farm.manager.runtime(serial).key in keys
