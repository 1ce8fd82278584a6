"""A TVM service (tracker, proxy) run as ``python -m farm.tvm.X`` in its own process group.

:class:`ServiceProcess` is what :class:`farm.tvm.tracker.TrackerProcess` and
:class:`farm.tvm.proxy.ProxyProcess` share: start the wrapper module through
:func:`farm.procs.spawn` (its own process group, ended with farmd even by
``kill -9``, the wrapper calling :func:`farm.procs.end_group_with_parent`),
wait until it serves, and stop the whole group. TVM's services fork a
``PopenWorker`` child that holds the socket and may outlive its parent, so
:meth:`ServiceProcess.stop` ends the group and waits until it is gone: an
orphan would keep the port.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self

from farm.clock import wait_until
from farm.errors import StopAsked, TrackerUnreachable
from farm.procs import group_alive, signal_group, spawn

__all__ = ["ServiceProcess"]

POLL_S = 0.05


class ServiceProcess:
    """A TVM service's wrapper process leading its own group, serving at ``host:port``."""

    #: The service in words, for :class:`~farm.errors.TrackerUnreachable` ("rpc_tracker").
    what = "service"

    def __init__(self, proc: subprocess.Popen[bytes], host: str, port: int) -> None:
        self._proc = proc
        self.host = host
        self.port = port
        self.pid = proc.pid

    @classmethod
    def _launch(cls, argv: Sequence[str], host: str, port: int, *, ready: Callable[[], bool],
                not_ready: str, log_path: Path | None, ready_timeout_s: float,
                stop_asked: threading.Event | None = None) -> Self:
        """Spawn ``argv`` and return once ``ready()`` while the process still runs.

        Args:
            argv: the wrapper's command line.
            host: the address it serves on.
            port: the port it serves on.
            ready: whether it serves now (called every 50 ms; a PING, a connect).
            not_ready: the reason in words when it never became ready ("no answer to PING").
            log_path: file for its output (appended); None discards it.
            ready_timeout_s: how long to wait for ``ready``, in seconds.
            stop_asked: set when the caller is asked to stop (a signal): the wait
                ends at once (None: never).

        Raises:
            TrackerUnreachable: it exited or was not ready in time; it is stopped then.
            StopAsked: ``stop_asked`` was set before it was ready; it is stopped then.
        """
        output = log_path.open("ab") if log_path is not None else subprocess.DEVNULL
        try:
            proc = spawn(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
        finally:
            if log_path is not None:
                output.close()  # type: ignore[union-attr]
        service = cls(proc, host, port)
        asked = stop_asked.is_set if stop_asked is not None else lambda: False
        served = wait_until(lambda: proc.poll() is not None or asked() or ready(),
                            ready_timeout_s, interval_s=POLL_S)
        code = proc.poll()
        if asked() and code is None:
            service.stop()
            raise StopAsked(f"asked to stop while the {cls.what} on {host}:{port} started")
        if not served or code is not None:
            service.stop()
            reason = f"exited with {code}" if code is not None else not_ready
            raise TrackerUnreachable(host, port, f"{cls.what} did not start: {reason}")
        return service

    def alive(self) -> bool:
        """Whether the service's main process is still running."""
        return self._proc.poll() is None

    def stop(self, timeout_s: float = 5.0) -> int:
        """SIGTERM the process group, SIGKILL it after ``timeout_s``; reap. Idempotent.

        Returns:
            The main process's exit code.
        """
        signal_group(self.pid, signal.SIGTERM)
        try:
            code = self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            signal_group(self.pid, signal.SIGKILL)
            code = self._proc.wait()
        # The PopenWorker child may outlive its parent: end the rest of the group
        # and wait until the kernel has removed it (SIGKILL is not synchronous).
        signal_group(self.pid, signal.SIGKILL)
        wait_until(lambda: not group_alive(self.pid), timeout_s, interval_s=POLL_S)
        return code

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
