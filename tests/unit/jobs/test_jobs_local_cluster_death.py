"""The jobs' local tracker and RPC servers end when the process that started them is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil

from farm.clock import wait_until
from farm.procs import process_alive, signal_group

# A stand-in pytest worker: a cluster with one server, its pids printed, then killed.
STARTER = """
import time
from farm.jobs.local_cluster import LocalCluster
cluster = LocalCluster()
cluster.start_tracker()
cluster.add_servers("death", 1)
print(cluster.tracker.pid, *[p.pid for p in cluster.servers["death"]], flush=True)
time.sleep(600)
"""


def test_tracker_and_servers_end_with_their_starter() -> None:
    """kill -9 of the starter alone: its tracker and server go too (they had their own sessions)."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE,
                               start_new_session=True)
    assert starter.stdout is not None
    pids = [int(pid) for pid in starter.stdout.readline().split()]
    try:
        assert len(pids) == 2
        started = [psutil.Process(pid) for pid in pids]
        os.kill(starter.pid, signal.SIGKILL)
        starter.wait(timeout=30)
        gone = wait_until(lambda: not any(process_alive(p) for p in started), 15)
        assert gone, f"outlived their starter: {[p.pid for p in started if process_alive(p)]}"
    finally:
        for pid in pids:
            signal_group(pid)
        signal_group(starter.pid)
