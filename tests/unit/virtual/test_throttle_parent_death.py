"""A throttled RPC app still ends with the process serving the phone, even on SIGKILL.

The app is stopped most of the time at a low speed, so it cannot answer its own
parent-death signal until something continues it: the throttler must.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from farm.clock import wait_until
from farm.procs import group_alive, signal_group

# A stand-in for the process serving virtual phones: one app, throttled to 5%.
PARENT = """
import asyncio, sys, time
from pathlib import Path
from farm.virtual.net import Net
from farm.virtual.rpc_process import RpcProcess

async def refuse(host_spec):
    raise ConnectionRefusedError(host_spec)

async def start():
    app = await RpcProcess.start(net=Net("lan", refuse), tracker_host="10.0.2.2", tracker_port=1,
                                 key="android", log_path=Path(sys.argv[1]))
    await app.set_speed(0.05)
    return app

app = asyncio.run(start())
print(app.pid, flush=True)
time.sleep(600)
"""


@pytest.fixture
def parent(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """(the serving process, its throttled app's pid); every group killed after."""
    process = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "rpc.log")],
                               stdout=subprocess.PIPE, start_new_session=True)
    assert process.stdout is not None
    app_pid = int(process.stdout.readline())
    yield process, app_pid
    signal_group(app_pid, signal.SIGCONT)
    signal_group(app_pid)
    signal_group(process.pid)
    process.wait(timeout=30)


def _throttlers_of(parent_pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(parent_pid).children()
            if "farm.virtual.throttle_main" in " ".join(p.cmdline())]


def test_throttled_app_and_its_throttler_end_when_the_server_is_killed(
    parent: tuple[subprocess.Popen[bytes], int],
) -> None:
    """After SIGKILL of the serving process, the throttler continues the app, and both end."""
    process, app_pid = parent
    [throttler] = _throttlers_of(process.pid)
    assert group_alive(app_pid)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert wait_until(lambda: not group_alive(app_pid), 30), "orphaned (stopped?) RPC app"
    assert wait_until(lambda: not psutil.pid_exists(throttler.pid)
                      or throttler.status() == psutil.STATUS_ZOMBIE, 30), "orphaned throttler"
