"""farmd's side of the zygote (:mod:`farm.runner.zygote`): start it, fork attempts, learn exits.

::

    zygote = Zygote.start(log_path)          # returns at once; its imports take seconds
    zygote.ready()                           # False until it has imported TVM and the jobs
    child = zygote.fork(args, run_dir, log)  # a WarmChild: pid, poll(), wait(), returncode
    zygote.close()                           # its children's groups and itself end

A forked child is the zygote's child, not farmd's, so farmd cannot ``waitpid``
it: the zygote reaps it and sends its exit status, and :class:`WarmChild`
reads that status the way ``subprocess.Popen`` reads its own (``returncode``
``-N`` for signal N). The dispatcher handles both kinds of child alike.

If the zygote is lost (it died, or its socket broke), each child it still ran
ends by itself (it watches its parent) and is killed here too; its exit
status is unknown and reads as SIGKILL, so the dispatcher reports the
attempt as a crash unless the child had already left its outcome.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from farm.backoff import backoff_s
from farm.clock import Clock
from farm.errors import InfraFault
from farm.procs import signal_group, spawn

__all__ = ["FORK_REPLY_S", "WarmChild", "Zygote", "ZygoteError", "ZygoteKeeper"]

log = structlog.get_logger(__name__)

FORK_REPLY_S = 10.0  # a fork answers in milliseconds; this is for a stuck zygote
#: How long the zygote may take to exit once its socket closes, before its group
#: is killed: it exits at once; farmd's whole stop must fit in about 10 s.
CLOSE_WAIT_S = 2.0
_RECV_BYTES = 65536
_LOST_CODE = -signal.SIGKILL


class ZygoteError(InfraFault):
    """The zygote could not fork an attempt child; the dispatcher starts it cold instead."""

    def __init__(self, pid: int, reason: str) -> None:
        self.pid = pid
        self.reason = reason
        super().__init__(f"zygote pid {pid} cannot fork: {reason}")


class WarmChild:
    """An attempt child forked by the zygote, read like a ``subprocess.Popen``.

    Attributes:
        pid: the child's pid, also its process group and session id.
        args: what it runs (for ``subprocess.TimeoutExpired``).
        returncode: None while it runs; then its exit code, ``-N`` for signal N.
    """

    def __init__(self, zygote: Zygote, pid: int, args: list[str]) -> None:
        self._zygote = zygote
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code if the child has ended, else None; never blocks."""
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self.pid, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end; returns its exit code.

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout`` seconds.
        """
        if self.returncode is None:
            self.returncode = self._zygote.exit_code(self.pid, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode


class Zygote:
    """A running zygote process and the socket farmd talks to it on.

    Thread-safe: farmd's ticks and its stop run in different threads.
    """

    def __init__(self, process: subprocess.Popen[bytes], control: socket.socket) -> None:
        self.process = process
        self._control = control
        self._lock = threading.Lock()
        self._buffer = b""
        self._ready = False
        self._lost = False
        self._replies: collections.deque[dict[str, Any]] = collections.deque()
        self._running: set[int] = set()
        self._exits: dict[int, int] = {}

    @classmethod
    def start(cls, log_path: Path) -> Zygote:
        """Start ``python -m farm.runner.zygote`` from farm's spawn thread; returns at once.

        Args:
            log_path: where the zygote's own output goes (appended).

        Raises:
            OSError: Python could not be started.
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        argv = [sys.executable, "-m", "farm.runner.zygote", "--control-fd", str(theirs.fileno()),
                "--parent-pid", str(os.getpid())]
        try:
            with log_path.open("ab") as log_file:
                process = spawn(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                stdout=log_file, stderr=subprocess.STDOUT)
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        log.info("zygote_starting", pid=process.pid)
        return cls(process, ours)

    @property
    def pid(self) -> int:
        """The zygote's pid (and process group)."""
        return self.process.pid

    def ready(self) -> bool:
        """Whether it has imported everything and can fork now."""
        with self._lock:
            self._pump(0.0)
            return self._ready and not self._lost

    def alive(self) -> bool:
        """Whether it is starting or serving (not dead, socket not broken)."""
        with self._lock:
            self._pump(0.0)
            return not self._lost and self.process.poll() is None

    def fork(self, args: list[str], run_dir: Path, log_path: Path) -> WarmChild:
        """Fork an attempt child running ``python -m farm.runner.child`` with ``args``.

        Args:
            args: the child's arguments, without ``--parent-pid`` (the zygote adds its own).
            run_dir: the child's working folder.
            log_path: its stdout and stderr (appended).

        Raises:
            ZygoteError: the zygote is lost, refused, or did not answer in
                :data:`FORK_REPLY_S`.
        """
        request = {"fork": args, "run_dir": str(run_dir), "log": str(log_path)}
        with self._lock:
            if self._lost:
                raise ZygoteError(self.pid, "it is gone")
            try:
                self._control.sendall(json.dumps(request).encode() + b"\n")
            except OSError as exc:
                self._lose(f"socket: {exc}")
                raise ZygoteError(self.pid, str(exc)) from exc
            end_s = time.monotonic() + FORK_REPLY_S
            while not self._replies and not self._lost and time.monotonic() < end_s:
                self._pump(end_s - time.monotonic())
            if not self._replies:
                self._lose("no answer to a fork request")
                raise ZygoteError(self.pid, "it died or did not answer")
            reply = self._replies.popleft()
            if "forked" not in reply:
                raise ZygoteError(self.pid, str(reply.get("error", reply)))
            pid = int(reply["forked"])
            self._running.add(pid)
            return WarmChild(self, pid, args)

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        """The exit code of child ``pid``, waiting up to ``timeout`` s (None: forever).

        A child of a lost zygote is killed and reads as ``-SIGKILL``.
        """
        end_s = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                self._pump(0.0)
                if pid in self._exits:
                    return self._exits.pop(pid)
                if self._lost:
                    return _LOST_CODE  # closed here: the zygote killed it on the way out
                left_s = None if end_s is None else end_s - time.monotonic()
                if left_s is not None and left_s <= 0:
                    return None
                self._pump(left_s)

    def close(self) -> None:
        """End the zygote: it kills its children's groups when its socket closes."""
        with self._lock:
            self._control.close()
            self._lost = True
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=CLOSE_WAIT_S)
        signal_group(self.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=CLOSE_WAIT_S)

    # --- reading the socket (callers hold the lock) ----------------------------------

    def _pump(self, timeout: float | None) -> None:
        """Read what the zygote sent, waiting up to ``timeout`` s for the first bytes."""
        if self._lost:
            return
        wait_s = timeout
        while True:
            try:
                readable, _, _ = select.select([self._control], [], [], wait_s)
            except (OSError, ValueError) as exc:
                self._lose(f"socket: {exc}")
                return
            if not readable:
                return
            try:
                data = self._control.recv(_RECV_BYTES)
            except OSError as exc:
                self._lose(f"socket: {exc}")
                return
            if not data:
                self._lose("socket closed")
                return
            self._buffer += data
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                self._take(json.loads(line))
            wait_s = 0.0

    def _take(self, message: dict[str, Any]) -> None:
        if "exited" in message:
            pid = int(message["exited"])
            self._running.discard(pid)
            self._exits[pid] = int(message["code"])
        elif "ready" in message:
            self._ready = True
            log.info("zygote_ready", pid=self.pid)
        else:
            self._replies.append(message)

    def _lose(self, reason: str) -> None:
        """The zygote is gone: its children end by themselves; make sure, and say so."""
        self._lost = True
        for pid in self._running:
            signal_group(pid)
            self._exits[pid] = _LOST_CODE
        log.warning("zygote_lost", pid=self.pid, reason=reason, children=sorted(self._running))
        self._running.clear()


class ZygoteKeeper:
    """Keeps one zygote up for a dispatcher: started at once, restarted when it dies.

    A zygote that dies is replaced at the next :meth:`ready_zygote` after
    farm's backoff (``failures`` counts deaths since the last one that became
    ready), so a zygote that cannot start costs a Python start now and then,
    not one per attempt; meanwhile attempts start cold.

    Args:
        log_path: the zygotes' output (appended).
        clock: monotonic time for the backoff.
        backoff_base_s: the first wait before a restart, seconds.
        backoff_max_s: the longest wait, seconds.
        on_start: called with each new zygote's pid (farmd notes it in farmd.json).
    """

    def __init__(self, log_path: Path, clock: Clock, *, backoff_base_s: float,
                 backoff_max_s: float, on_start: Callable[[int], None] | None = None) -> None:
        self.log_path = log_path
        self.clock = clock
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.on_start = on_start
        self.zygote: Zygote | None = None
        self.failures = 0
        self._retry_s = 0.0
        self._start()

    def _start(self) -> None:
        try:
            self.zygote = Zygote.start(self.log_path)
        except OSError as exc:
            self._failed(f"cannot start: {exc}")
            return
        if self.on_start is not None:
            self.on_start(self.zygote.pid)

    def _failed(self, reason: str) -> None:
        self.zygote = None
        self.failures += 1
        retry_in_s = backoff_s(self.failures, self.backoff_base_s, self.backoff_max_s)
        self._retry_s = self.clock.monotonic() + retry_in_s
        log.warning("zygote_down", reason=reason, failures=self.failures, retry_in_s=retry_in_s)

    def ready_zygote(self) -> Zygote | None:
        """The zygote if it can fork now; None while it starts or after it died."""
        zygote = self.zygote
        if zygote is None:
            if self.clock.monotonic() >= self._retry_s:
                self._start()
            return None
        if zygote.ready():
            self.failures = 0
            return zygote
        if not zygote.alive():
            zygote.close()
            self._failed(f"pid {zygote.pid} exited with {zygote.process.returncode}")
        return None

    def close(self) -> None:
        """End the zygote and its children."""
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
