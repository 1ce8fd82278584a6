"""Fixtures for tests that drive virtual phones through a real adb server.

* ``adb_server``: a private adb server (own port, own ``$HOME`` and host key),
  killed after the test.
* ``make_fleet``: ``make_fleet(n, network="lan", **kw)`` starts ``n`` phones
  attached to that server and waits until each is ``device``; every fleet is
  stopped (its phones' processes ended) after the test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apk_tools.keys import create_pem_key
from apk_tools.prepare import prepare
from apk_tools.standin import build_standin_apk
from farm.testing import FleetHarness, fleet_harness
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle
from farm.virtual.testing import adb_server as _adb_server
from farm.virtual.testing import fleet as _fleet

pytestmark = pytest.mark.fleet


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
