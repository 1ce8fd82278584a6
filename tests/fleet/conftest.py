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
