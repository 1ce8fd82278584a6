"""A real TVM session through the tracker to a virtual phone's RPC app."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from farm.queue.models import DeviceState
from farm.testing import FleetHarness as Farm
from farm.virtual.fleet import Fleet

pytestmark = pytest.mark.fleet


def _vector_add(path: Path) -> Path:
    import tvm
    from tvm import te

    n = 1024
    a = te.placeholder((n,), name="a", dtype="float32")
    b = te.placeholder((n,), name="b", dtype="float32")
    c = te.compute((n,), lambda i: a[i] + b[i], name="c")
    module = tvm.compile(te.create_prim_func([a, b, c]).with_attr("global_symbol", "add"),
                         target={"kind": "llvm"})
    module.export_library(str(path))
    return path


class TestAppSession:
    def test_module_runs_on_the_phone_and_matches_numpy(
        self, make_fleet: Callable[..., Fleet], make_farm: Callable[..., Farm],
        tmp_path: Path,
    ) -> None:
        """A module built with TVM is uploaded to a lan phone's app, run, and checked."""
        import tvm
        from tvm import rpc

        farm = make_farm(network="lan", phone_host="10.0.2.2")
        phones = make_fleet(1, network="lan")
        serial = phones.serials[0]
        farm.wait_state([serial], DeviceState.READY, 90)
        library = _vector_add(tmp_path / "add.so")

        session = rpc.connect_tracker(*farm.tracker_addr).request(
            farm.manager.runtime(serial).key, session_timeout=60)
        session.upload(str(library))
        add = session.load_module("add.so")["add"]
        dev = session.cpu(0)
        rng = np.random.default_rng(0)
        a, b = (rng.random(1024, dtype=np.float32) for _ in range(2))
        out = tvm.runtime.tensor(np.zeros(1024, np.float32), dev)
        add(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), out)
        np.testing.assert_allclose(out.numpy(), a + b, rtol=1e-6)
