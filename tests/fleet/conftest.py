"""Fixtures for tests that drive virtual phones through a real adb server.

* ``adb_server``: a private adb server (own port, own ``$HOME`` and host key),
  killed after the test.
* ``make_fleet``: ``make_fleet(n, network="lan", **kw)`` starts ``n`` phones
  attached to that server and waits until each is ``device``; every fleet is
  stopped (its phones' processes ended) after the test.
* ``start_farmd``: ``start_farmd(phones, same_model=False, **jobs)`` runs an
  in-process farmd with that many ready usb-only phones (:class:`RunningFarmd`).
* ``signed_apk``, ``demo_apk_path``: the stand-in APK signed with a test key, and
  farmd's demo APK; each built once per session (per xdist worker), read only.

Every virtual phone a test starts in-process waits :data:`QUICK_APP_START_S`
before its stock app starts the RPC activity, not the stock 5 s; a test marked
``stock_app_delay`` keeps the 5 s (:func:`_quick_app_start`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from apk_tools.keys import create_pem_key
from apk_tools.prepare import prepare
from apk_tools.standin import build_standin_apk
from farm.clock import wait_until
from farm.config import Settings
from farm.daemon import Farmd
from farm.netaddr import free_port
from farm.procs import signal_group, spawn, tied_to_parent
from farm.provision.standin import demo_apk
from farm.queue.models import DeviceState
from farm.queue.store import Store
from farm.runner.dispatcher import CHILD_LOG
from farm.testing import FleetHarness, fleet_harness
from farm.virtual.android import spec as phone_spec
from farm.virtual.android.spec import profiles
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle
from farm.virtual.testing import adb_server as _adb_server
from farm.virtual.testing import fleet as _fleet

pytestmark = pytest.mark.fleet

#: Seconds the virtual stock app waits from ``MainActivity.onResume`` to starting
#: its RPC activity in fleet tests. The stock app waits 5 s (apache/tvm
#: apps/android_rpc ``MainActivity.HANDLER_RESTART_DELAY``, the phones' default
#: :attr:`~farm.virtual.android.spec.PhoneSpec.rpc_start_delay_s`); every
#: provisioning, crash relaunch and key move paid it, 4 s more than this each.
QUICK_APP_START_S = 1.0


@pytest.fixture(autouse=True)
def _quick_app_start(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Phones from :func:`~farm.virtual.android.spec.profiles` relaunch after a short delay.

    After :data:`QUICK_APP_START_S`, not 5 s; only the delay changes: the app
    starts nothing before ``onResume`` and the relaunch, in the same order.
    Tests marked ``stock_app_delay`` (a user's path end to end: the demo, the
    first afternoon) keep the stock 5 s, so farm's own waits are still shown to
    cover it. Phones a farmd process starts (``--virtual-phones``) keep it too:
    the patch is this process's.
    """
    if request.node.get_closest_marker("stock_app_delay") is not None:
        return
    quick = tuple(dataclasses.replace(p, rpc_start_delay_s=QUICK_APP_START_S)
                  for p in phone_spec._PROFILES)
    monkeypatch.setattr(phone_spec, "_PROFILES", quick)


@pytest.fixture
def adb_server() -> Iterator[AdbServerHandle]:
    """A private adb server on a free port, ended after the test."""
    with _adb_server() as server:
        yield server


@pytest.fixture
def make_fleet(
    adb_server: AdbServerHandle, tmp_path: Path
) -> Iterator[Callable[..., Fleet]]:
    """Factory of fleets attached to ``adb_server``; all are stopped after the test."""
    with contextlib.ExitStack() as stack:
        count = 0

        def make(n: int, network: str = "lan", **kwargs: object) -> Fleet:
            nonlocal count
            count += 1
            data_dir = tmp_path / f"fleet-{count}"
            return stack.enter_context(
                _fleet(n, network, adb_port=adb_server.port, data_dir=data_dir, **kwargs)  # type: ignore[arg-type]
            )

        yield make


@pytest.fixture(scope="session")
def signed_apk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in TVM RPC APK, signed with a test key."""
    root = tmp_path_factory.mktemp("apk")
    key = create_pem_key(root / "k.pem", root / "k.crt", common_name="farm-test")
    return prepare(build_standin_apk(root / "unsigned", version_code=3), key, root / "signed")


@pytest.fixture
def make_farm(
    adb_server: AdbServerHandle, tmp_path: Path, signed_apk: Path
) -> Iterator[Callable[..., FleetHarness]]:
    """Factory of fleet managers wired as farmd wires them; all stop after the test.

    ``make_farm(**overrides)`` takes :class:`farm.fleet.manager.FleetOptions` fields.
    """
    with contextlib.ExitStack() as stack:
        count = 0

        def make(**overrides: object) -> FleetHarness:
            nonlocal count
            count += 1
            data_dir = tmp_path / f"farm-{count}"
            data_dir.mkdir()
            apk = overrides.pop("apk", signed_apk)
            return stack.enter_context(
                fleet_harness(adb_server.port, data_dir, apk, **overrides)  # type: ignore[arg-type]
            )

        yield make


READY_DEADLINE_S = 150.0
JOB_DEADLINE_S = 240.0


@dataclass
class RunningFarmd:
    """An in-process farmd with its virtual phones."""

    farmd: Farmd
    fleet: Fleet

    @property
    def store(self) -> Store:
        """farmd's queue."""
        return self.farmd.store

    @property
    def serials(self) -> list[str]:
        """The virtual phones' serials."""
        return list(self.fleet.serials)

    @property
    def data_dir(self) -> Path:
        """farmd's data folder."""
        return self.farmd.data_dir

    def wait_ready(self, deadline_s: float = READY_DEADLINE_S) -> None:
        """Wait until every phone is provisioned, registered and ``ready``."""
        def ready() -> bool:
            return all((d := self.store.get_device(s)) is not None and d.state is DeviceState.READY
                       for s in self.serials)

        wait_until(ready, deadline_s, "every phone ready")

    def enqueue(self, spec: dict[str, Any]) -> int:
        """Put ``spec`` on the queue now."""
        return self.store.enqueue(spec, datetime.now(UTC))

    def wait_finished(self, job_ids: list[int], deadline_s: float = JOB_DEADLINE_S) -> None:
        """Wait until every job reached a final state."""
        wait_until(lambda: all(self.store.get_job(i).state.ended for i in job_ids),  # type: ignore[union-attr]
                   deadline_s, f"jobs {job_ids} finished")

    def child_logs(self, job_ids: list[int]) -> str:
        """The child logs of every attempt of ``job_ids``, concatenated."""
        runs = self.data_dir / "runs"
        return "".join(
            (runs / f"attempt-{a.id}" / CHILD_LOG).read_text(errors="replace")
            for i in job_ids for a in self.store.attempts(i)
            if (runs / f"attempt-{a.id}" / CHILD_LOG).is_file()
        )


#: Fleet tests check plumbing, not the speed verdicts: a gemm or model
#: measurement keeps its warm-up and sample counts but not its default time
#: bounds (1 s of warm-up and 1 s of samples per phone and run). The defaults'
#: power is tests/jobs/test_jobs_throttle_compare.py's and bench_detection's.
PLUMBING_RESULTS = {"warmup_min_s": 0.0, "min_measure_s": 0.0}


def farmd_settings(data_dir: Path, adb_port: int, apk: Path, **sections: Any) -> Settings:
    """Hermetic farmd settings: tmp data folder, private adb server, free ports, usb-only.

    ``sections`` add config sections or replace these whole, e.g.
    ``health={"interval_s": 2.0}``, ``jobs={"tick_interval_s": 60.0}``;
    ``results`` is :data:`PLUMBING_RESULTS` unless given.
    """
    return Settings.model_validate({
        "results": PLUMBING_RESULTS,
        "data_dir": str(data_dir),
        "adb": {"port": adb_port},
        "apk": {"path": str(apk)},
        "tracker": {"port": free_port(), "network": "usb-only"},
        "metrics": {"enabled": False},
        "api": {"enabled": False},
        **sections,
    })


@pytest.fixture(scope="session")
def demo_apk_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """farmd's demo APK (the stand-in, signed with a demo key), built once per session.

    Building it runs aapt, zipalign and apksigner (a JVM): about 1.5 s on 2 cores,
    which every farmd test paid when each built its own. Tests only read it.
    """
    return demo_apk(tmp_path_factory.mktemp("demo-apk"))


@pytest.fixture
def hermetic_settings(
    adb_server: AdbServerHandle, tmp_path: Path, demo_apk_path: Path
) -> Callable[..., Settings]:
    """Factory: ``hermetic_settings(**sections)`` -> :func:`farmd_settings` for this test.

    Data folder ``tmp_path / "farm"``, the test's adb server, the session's demo
    APK (:func:`demo_apk_path`); ``sections`` as in :func:`farmd_settings`.
    """
    def make(**sections: Any) -> Settings:
        return farmd_settings(tmp_path / "farm", adb_server.port, demo_apk_path, **sections)

    return make


@pytest.fixture(scope="session")
def farmd_settings_at(demo_apk_path: Path) -> Callable[..., Settings]:
    """Factory: ``farmd_settings_at(data_dir, adb_port, **sections)`` -> :func:`farmd_settings`.

    For a fixture wider than one test (a class's farmd), which cannot use the
    per-test :func:`hermetic_settings`.
    """
    return functools.partial(farmd_settings, apk=demo_apk_path)


@pytest.fixture
def start_farmd(
    adb_server: AdbServerHandle, tmp_path: Path, hermetic_settings: Callable[..., Settings]
) -> Iterator[Callable[..., RunningFarmd]]:
    """Factory: ``start_farmd(phones, same_model=False, api=False)`` -> farmd with ready phones.

    The phones are plugged into farmd's adb server the way USB phones are; with
    ``same_model`` they are all the first built-in model, so they share one
    compile target; with ``api`` farmd serves its HTTP API on a free loopback
    port (``farmd.api_server.url``); ``results`` replaces :data:`PLUMBING_RESULTS`
    (``{}``: a user's defaults); ``reservations`` is the ``[reservations]``
    section; other keywords are ``[jobs]`` settings. Every farmd and phone is
    stopped after the test.
    """
    with contextlib.ExitStack() as stack:
        def start(phones: int, *, same_model: bool = False, api: bool = False,
                  results: dict[str, float] | None = None,
                  reservations: dict[str, float] | None = None, **jobs: float) -> RunningFarmd:
            specs = profiles(1 if same_model else phones, "usb-only")
            specs = [specs[i % len(specs)] for i in range(phones)]
            fleet = stack.enter_context(
                Fleet(phones, specs=specs, adb_port=adb_server.port, data_dir=tmp_path / "phones"))
            served: dict[str, Any] = {"api": {"port": free_port()}} if api else {}
            if results is not None:
                served["results"] = results
            if reservations is not None:
                served["reservations"] = reservations
            farmd = Farmd(hermetic_settings(jobs=jobs, **served))
            stack.callback(farmd.stop)
            farmd.start()
            running = RunningFarmd(farmd, fleet)
            running.wait_ready()
            return running

        yield start


@pytest.fixture
def farmd_process() -> Iterator[Callable[[Path, Path], subprocess.Popen[bytes]]]:
    """Start ``farmd --config CONFIG`` as a real process, logging JSON lines to a file.

    Each runs in its own process group; after the test, every farmd started and
    every process group under it is killed, and a killed test worker (SIGKILL)
    takes its farmd with it (:func:`farm.procs.tied_to_parent`).
    """
    started: list[subprocess.Popen[bytes]] = []

    def start(config: Path, log_path: Path) -> subprocess.Popen[bytes]:
        with log_path.open("ab") as log:
            process = spawn(
                tied_to_parent([sys.executable, "-c", "from farm.daemon import main; main()",
                                "--config", str(config), "--json-logs"]),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        started.append(process)
        return process

    yield start
    for process in started:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(process.pid).children(recursive=True):
                signal_group(child.pid)
        signal_group(process.pid)
        process.wait(timeout=30)
