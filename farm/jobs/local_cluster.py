"""A TVM tracker and RPC servers on loopback, for the jobs' tests and ``bench/``.

Each process gets its own process group (:func:`farm.procs.spawn`) because
``tvm.exec.rpc_server`` leaves ``popen_worker`` children behind; :meth:`close`
kills the whole group. Each is also tied to this process
(:func:`farm.procs.tied_to_parent`), so a test run killed with -9 leaves no
tracker or server behind (two servers and a tracker outlived such a run by an
hour). Readiness is waited for by polling the tracker's summary
with a deadline, never by sleeping a fixed time.

This is not farm's tracker supervision (``farm/tvm``): it is a disposable stand-in
for "phones serving a key" that needs no phone.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field

from farm.clock import wait_until
from farm.errors import TrackerUnreachable
from farm.gpu.server import server_argv
from farm.netaddr import free_port
from farm.procs import signal_group, spawn, tied_to_parent


@dataclass
class LocalCluster:
    """A tracker on 127.0.0.1 and RPC servers registered under keys.

    Attributes:
        host: always ``"127.0.0.1"``.
        port: the tracker's port.
        servers: server processes by key.
    """

    host: str = "127.0.0.1"
    port: int = 0
    tracker: subprocess.Popen[bytes] | None = None
    servers: dict[str, list[subprocess.Popen[bytes]]] = field(default_factory=dict)

    def start_tracker(self, deadline_s: float = 30.0) -> None:
        """Start the tracker and wait until it accepts connections.

        Raises:
            TrackerUnreachable: it did not come up within ``deadline_s``.
        """
        self.port = free_port()
        self.tracker = spawn(tied_to_parent(
            [
                sys.executable,
                "-m",
                "tvm.exec.rpc_tracker",
                "--host",
                self.host,
                "--port",
                str(self.port),
                "--port-end",
                str(self.port + 1),
            ]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if not wait_until(self._tracker_answers, deadline_s):
            raise TrackerUnreachable(self.host, self.port, "local tracker did not start")

    def _tracker_answers(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    def summary(self) -> dict:
        """The tracker's summary (``queue_info`` by key, ``server_info``)."""
        from tvm import rpc

        return rpc.connect_tracker(self.host, self.port).summary()

    def free_servers(self, key: str) -> int:
        """How many servers of ``key`` the tracker lists as free (0 on any error)."""
        try:
            return int(self.summary()["queue_info"].get(key, {}).get("free", 0))
        except (OSError, RuntimeError, KeyError):
            return 0

    def add_servers(self, key: str, count: int = 1, deadline_s: float = 60.0,
                    no_fork: bool = False) -> None:
        """Start ``count`` RPC servers under ``key`` and wait until all are free.

        ``no_fork`` serves each session in the server's own process, as a GPU
        needs (:mod:`farm.gpu.server`: CUDA fails in a forked child of a
        process that initialized it, and a spawned one costs seconds a session).

        Raises:
            TrackerUnreachable: they did not register within ``deadline_s``.
        """
        procs = self.servers.setdefault(key, [])
        for _ in range(count):
            port = free_port()
            argv = (server_argv(tracker_host=self.host, tracker_port=self.port, key=key,
                                host=self.host, port=port, parent_pid=os.getpid())
                    if no_fork else
                    [sys.executable, "-m", "tvm.exec.rpc_server", "--host", self.host,
                     "--port", str(port), "--port-end", str(port + 1),
                     "--tracker", f"{self.host}:{self.port}", "--key", key])
            procs.append(spawn(tied_to_parent(argv), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL))
        want = len(procs)
        if not wait_until(lambda: self.free_servers(key) >= want, deadline_s, interval_s=0.2):
            raise TrackerUnreachable(
                self.host, self.port, f"{want} servers of {key!r} did not register"
            )

    def close(self) -> None:
        """Kill every process group this cluster started and reap them."""
        procs = [p for group in self.servers.values() for p in group]
        if self.tracker is not None:
            procs.append(self.tracker)
        for proc in procs:
            signal_group(proc.pid)
        for proc in procs:
            proc.wait(timeout=30)
        self.servers.clear()
        self.tracker = None
