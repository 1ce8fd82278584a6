r"""The zygote: a process with TVM and the job code imported that forks attempt children.

::

    python -m farm.runner.zygote --control-fd 5 --parent-pid 4242

A cold attempt child (``python -m farm.runner.child``) spends seconds starting
Python and importing TVM, numpy, SQLAlchemy and the job code before it touches
a phone. The zygote pays that once: it imports :data:`PRELOAD`, says it is
ready, and then forks one child per request. The forked child runs exactly
what ``python -m farm.runner.child`` runs (:func:`farm.runner.child.main`,
same arguments), and keeps the cold child's isolation: it leads its own
session and process group (``os.setsid``), writes its own ``child.log``, and a
SIGSEGV in TVM ends it alone.

Forking is safe here because the zygote runs no thread of its own when it
forks: importing TVM starts none, and the one thread numpy's OpenBLAS starts
at import is shut down and restarted around ``fork`` by OpenBLAS's own
``pthread_atfork`` handlers (``blas_thread_shutdown_``, OpenBLAS
``driver/others/blas_server.c``).

Protocol, JSON lines over one AF_UNIX stream socket that farmd passes as
``--control-fd`` (client side: :mod:`farm.runner.warm`)::

    zygote -> farmd   {"ready": <zygote pid>}             imports done
    farmd  -> zygote  {"fork": [args], "run_dir": "...", "log": "..."}
    zygote -> farmd   {"forked": <pid>} | {"error": "..."}  one per request, in order
    zygote -> farmd   {"exited": <pid>, "code": <code>}   whenever a child ends

``code`` reads as ``Popen.returncode``: the exit status, or ``-N`` for signal N.
The zygote reaps its children (SIGCHLD), so the dispatcher learns each exit
status from it rather than from ``waitpid``.

Ending: the zygote ends its children's process groups and itself when farmd
dies (``PR_SET_PDEATHSIG``, :mod:`farm.procs`; farmd starts it from its
long-lived spawn thread), on SIGTERM, and when farmd closes the socket. Each
child also watches its parent, the zygote (``--parent-pid``), so a zygote
killed with ``kill -9`` still takes its children with it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from farm.procs import set_parent_death_signal, signal_group

__all__ = ["PRELOAD", "ForkRequest", "main"]

#: What a cold child imports before it runs a job; an optional one missing is skipped.
#: ``tvm.s_tir.tensor_intrin`` is what MetaSchedule's ``TuneContext`` imports first:
#: its TVMScript parser walks the stack for each of ~500 functions, so all are
#: imported under :func:`farm.jobs.tvmscript.light_frames` (62 s in a fresh
#: process otherwise, 128 s or more after the job code on the loaded 2-core CI host).
PRELOAD = (
    "numpy", "tvm", "tvm.s_tir.tensor_intrin", "tvm.te", "tvm.rpc", "tvm.s_tir", "tvm.relax",
    "farm.runner.child", "farm.kinds.run", "farm.runner.gating", "farm.kinds",
    "farm.jobs.gemm", "farm.jobs.model", "farm.tuning.gemm", "farm.queue.store",
    "farm.controllers.android_health", "farm.logs",
)
EXIT_FORK_FAILED = 4  # the forked child could not set itself up (log, run folder)
_RECV_BYTES = 65536


@dataclass(frozen=True)
class ForkRequest:
    """One attempt child to fork.

    Attributes:
        args: :func:`farm.runner.child.main`'s arguments, without ``--parent-pid``.
        run_dir: the child's working folder.
        log: where its stdout and stderr go (``child.log``).
    """

    args: list[str]
    run_dir: Path
    log: Path

    @classmethod
    def of(cls, message: dict[str, Any]) -> ForkRequest:
        """Read a ``{"fork": ...}`` message; raises ValueError if it is malformed."""
        args = message.get("fork")
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError(f"bad fork request: {message!r}")
        return cls(args, Path(str(message["run_dir"])), Path(str(message["log"])))


def preload(modules: Sequence[str] = PRELOAD) -> None:
    """Import ``modules`` (those not installed are skipped), then freeze the GC's heap.

    ``gc.freeze`` keeps the collector from touching the imported objects in
    the children, so their pages stay shared with the zygote (copy-on-write).
    """
    from farm.jobs.tvmscript import light_frames

    with light_frames():
        for name in modules:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
    gc.freeze()


class _Zygote:
    """The serving loop: requests in, children forked, exits reported."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.children: set[int] = set()
        self.buffer = b""
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd does the work
        signal.set_wakeup_fd(self.wake_w)

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.control.sendall(json.dumps(message).encode() + b"\n")
        except OSError:
            self.end()  # farmd is gone

    def end(self, *_: object) -> None:
        """Kill every child's process group, then leave (farmd is gone or closed us)."""
        for pid in self.children:
            signal_group(pid)
        os._exit(0)

    def serve(self) -> ForkRequest:
        """Serve until farmd goes; returns only in a forked child, with its request."""
        while True:
            control_fd = self.control.fileno()
            readable, _, _ = select.select([control_fd, self.wake_r], [], [])
            if self.wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 4096)
                self.reap()
            if control_fd in readable:
                data = self.control.recv(_RECV_BYTES)
                if not data:
                    self.end()
                self.buffer += data
                while b"\n" in self.buffer:
                    line, self.buffer = self.buffer.split(b"\n", 1)
                    request = self.fork(line)
                    if request is not None:
                        return request

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            self.send({"exited": pid, "code": os.waitstatus_to_exitcode(status)})

    def fork(self, line: bytes) -> ForkRequest | None:
        """Fork the child ``line`` asks for; returns its request in the child, None here.

        The pid is sent only once the child leads its own session, so farmd
        can kill its process group from the moment it knows the pid.
        """
        try:
            request = ForkRequest.of(json.loads(line))
            sys.stdout.flush()
            sys.stderr.flush()
            in_session_r, in_session_w = os.pipe()
            pid = os.fork()
        except (ValueError, KeyError, OSError) as exc:
            self.send({"error": str(exc)})
            return None
        if pid == 0:
            self.children.clear()  # a SIGTERM before the reset must not reach the siblings
            os.setsid()
            os.close(in_session_r)
            os.close(in_session_w)  # the zygote reads end-of-file: the session exists
            return request
        os.close(in_session_w)
        os.read(in_session_r, 1)
        os.close(in_session_r)
        self.children.add(pid)
        self.send({"forked": pid})
        return None

    def become_child(self, request: ForkRequest) -> None:
        """In the forked child: drop the zygote's state and take the cold child's setup.

        Raises:
            OSError: the log or the run folder cannot be opened.
        """
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        self.control.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        log_fd = os.open(request.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.close(null_fd)
        os.chdir(request.run_dir)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m farm.runner.zygote",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--control-fd", type=int, required=True,
                        help="the AF_UNIX stream socket farmd talks on")
    parser.add_argument("--parent-pid", type=int, required=True,
                        help="farmd's pid: end everything when it dies")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: preload, serve, and in each forked child run the attempt.

    Returns:
        In a forked child, :func:`farm.runner.child.main`'s exit code; the
        zygote itself leaves through ``os._exit``.
    """
    args = _parser().parse_args(argv)
    control = socket.socket(fileno=args.control_fd)
    zygote = _Zygote(control)

    def end_on_signal(_signum: int, _frame: FrameType | None) -> None:
        zygote.end()

    signal.signal(signal.SIGTERM, end_on_signal)
    set_parent_death_signal(signal.SIGTERM)
    if os.getppid() != args.parent_pid:
        zygote.end()  # farmd died before the death signal was set
    preload()
    zygote_pid = os.getpid()  # read before the fork: a child asking later may get init's
    zygote.send({"ready": zygote_pid})
    request = zygote.serve()
    try:
        zygote.become_child(request)
    except OSError as exc:
        with contextlib.suppress(OSError):
            sys.stderr.write(f"Error: cannot set up the attempt child: {exc}\n")
        os._exit(EXIT_FORK_FAILED)
    from farm.runner import child

    return child.main([*request.args, "--parent-pid", str(zygote_pid)])


if __name__ == "__main__":
    sys.exit(main())
