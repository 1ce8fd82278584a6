"""The pool key: a stock script's ``request("android")`` gets an idle phone while farm runs jobs.

farmd runs with ``pool.key = "android"`` on three usb-only virtual phones. A
hand script (a real ``tvm.rpc.connect_tracker(...).request("android")`` in its
own process) gets one phone and runs a TVM function on it; meanwhile farm runs
jobs on the other phones and gives none to the phone the session holds; when
the session ends the phone is offered again.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from farm.clock import wait_until
from farm.config import Settings
from farm.daemon import Farmd
from farm.queue.models import DeviceState, JobState
from farm.virtual.android.spec import profiles
from farm.virtual.fleet import Fleet
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet

POOL_KEY = "android"
READY_DEADLINE_S = 150.0
JOB_DEADLINE_S = 240.0
TINY_GEMM = {"kind": "gemm", "params": {"n": 16, "number": 1, "repeat": 3}}

HAND_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import tvm
    from tvm import rpc
    host, port, key, library = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    session = rpc.connect_tracker(host, port).request(key, session_timeout=600)
    session.upload(library)
    add = session.load_module("add.so")["add"]
    dev = session.cpu(0)
    a = np.arange(64, dtype=np.float32)
    out = tvm.runtime.tensor(np.zeros(64, np.float32), dev)
    add(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(a, dev), out)
    np.testing.assert_allclose(out.numpy(), a + a)
    print("ran", flush=True)
    sys.stdin.read()  # hold the phone until the test closes stdin
""")


def _vector_add(path: Path) -> Path:
    """A TVM module ``add(a, b, c)`` over float32[64], built for the host (the virtual phones)."""
    import tvm
    from tvm import te

    a = te.placeholder((64,), name="a", dtype="float32")
    b = te.placeholder((64,), name="b", dtype="float32")
    c = te.compute((64,), lambda i: a[i] + b[i], name="c")
    module = tvm.compile(te.create_prim_func([a, b, c]).with_attr("global_symbol", "add"),
                         target={"kind": "llvm"})
    module.export_library(str(path))
    return path


@pytest.fixture
def pool_farmd(
    adb_server: AdbServerHandle, tmp_path: Path, hermetic_settings: Callable[..., Settings]
) -> Iterator[Callable[[int], Farmd]]:
    """Factory: ``pool_farmd(n)`` -> a farmd with ``n`` ready usb-only phones and a pool key."""
    with contextlib.ExitStack() as stack:
        def start(phones: int) -> Farmd:
            specs = profiles(phones, "usb-only")
            fleet = stack.enter_context(Fleet(phones, specs=specs, adb_port=adb_server.port,
                                              data_dir=tmp_path / "phones"))
            settings = hermetic_settings(health={"interval_s": 5.0},
                                         pool={"key": POOL_KEY, "interval_s": 0.5})
            farmd = Farmd(settings)
            stack.callback(farmd.stop)
            farmd.start()

            def ready() -> bool:
                return all((d := farmd.store.get_device(s)) is not None
                           and d.state is DeviceState.READY for s in fleet.serials)

            wait_until(ready, READY_DEADLINE_S, "every phone ready")
            return farmd

        yield start


def pool_held(farmd: Farmd) -> str | None:
    """The serial a pool session holds, or None."""
    return next((d.serial for d in farmd.store.list_devices()
                 if d.held_outside and f"pool key {POOL_KEY}" in d.held_outside), None)


class TestPoolKey:
    def test_hand_script_gets_a_phone_while_jobs_run_on_the_others(
        self, pool_farmd: Callable[[int], Farmd], tmp_path: Path
    ) -> None:
        """request(pool key) runs a function on one phone; jobs run on the others, none on it."""
        farmd = pool_farmd(3)
        serials = {d.serial for d in farmd.store.list_devices()}
        assert farmd.pool is not None
        pool = farmd.pool
        wait_until(lambda: pool.offered() == serials, 60.0, "every idle phone in the pool")
        library = _vector_add(tmp_path / "add.so")
        host, port = farmd.tracker_addr
        hand = subprocess.Popen(
            [sys.executable, "-c", HAND_SCRIPT, host, str(port), POOL_KEY, str(library)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        try:
            assert hand.stdout is not None and hand.stdout.readline().strip() == b"ran"
            held = wait_until(lambda: pool_held(farmd), 30.0, "the pool session's phone held")
            assert held is not None
            wait_until(lambda: held not in pool.offered(), 30.0, "the held phone withdrawn")
            job_ids = [farmd.store.enqueue(TINY_GEMM, farmd.clock.now()) for _ in range(4)]
            wait_until(lambda: all(farmd.store.get_job(i).state.ended for i in job_ids),  # type: ignore[union-attr]
                       JOB_DEADLINE_S, "the jobs finished")
            for job_id in job_ids:
                assert farmd.store.get_job(job_id).state is JobState.SUCCEEDED  # type: ignore[union-attr]
                for attempt in farmd.store.attempts(job_id):
                    assert held not in attempt.serials
            assert pool_held(farmd) == held  # still the session's all along
        finally:
            hand.communicate(timeout=60)  # closes stdin: the session ends
        assert hand.returncode == 0
        wait_until(lambda: pool_held(farmd) is None, 60.0, "the pool session's hold cleared")
        wait_until(lambda: held in pool.offered(), 60.0, "the phone offered again")

    def test_a_busy_phone_is_withdrawn(self, pool_farmd: Callable[[int], Farmd]) -> None:
        """A phone running a job leaves the pool and comes back once the job ended."""
        farmd = pool_farmd(1)
        serial = farmd.store.list_devices()[0].serial
        assert farmd.pool is not None
        pool = farmd.pool
        wait_until(lambda: pool.offered() == {serial}, 60.0, "the phone in the pool")
        long_gemm = {"kind": "gemm", "params": {"n": 256, "number": 20, "repeat": 30}}
        job_id = farmd.store.enqueue(long_gemm, farmd.clock.now())
        wait_until(lambda: pool.offered() == set(), 60.0, "the busy phone withdrawn")
        wait_until(lambda: farmd.store.get_job(job_id).state.ended,  # type: ignore[union-attr]
                   JOB_DEADLINE_S, "the job finished")
        wait_until(lambda: pool.offered() == {serial}, 60.0, "the phone offered again")
