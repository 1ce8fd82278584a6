"""A virtual phone's RPC app ends with the process serving the phone, even on SIGKILL.

``farmd --virtual-phones`` serves its phones in-process: an app must not
outlive a farmd killed with -9 (issue 10).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.clock import wait_until
from farm.procs import group_alive, signal_group

# A stand-in for the process serving virtual phones: one app on a lan phone.
PARENT = """
import asyncio, sys, time
from pathlib import Path
from farm.virtual.net import Net
from farm.virtual.rpc_process import RpcProcess

async def refuse(host_spec):
    raise ConnectionRefusedError(host_spec)

async def start():
    return await RpcProcess.start(net=Net("lan", refuse), tracker_host="10.0.2.2", tracker_port=1,
                                  key="android", log_path=Path(sys.argv[1]))

app = asyncio.run(start())
print(app.pid, flush=True)
time.sleep(600)
"""


@pytest.fixture
def parent(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """(the serving process, its app's pid); both groups killed after."""
    process = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "rpc.log")],
                               stdout=subprocess.PIPE, start_new_session=True)
    assert process.stdout is not None
    app_pid = int(process.stdout.readline())
    yield process, app_pid
    signal_group(app_pid)
    signal_group(process.pid)
    process.wait(timeout=30)


def test_app_group_ends_when_its_server_is_killed(
    parent: tuple[subprocess.Popen[bytes], int],
) -> None:
    """After SIGKILL of the serving process alone, the app's whole process group ends."""
    process, app_pid = parent
    assert group_alive(app_pid)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert wait_until(lambda: not group_alive(app_pid), 30), "orphaned RPC app"
