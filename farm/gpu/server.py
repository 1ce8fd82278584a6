"""One GPU's TVM RPC server, ended with farmd, serving every session in its own process.

``python -m farm.gpu.server --parent-pid FARMD --host H --port P --port-end P+1
--tracker T:PORT --key KEY`` ends its own process group when farmd dies
(:func:`farm.procs.end_group_with_parent`, also on ``kill -9``), registers at
the tracker as TVM's server does, and serves each session in this process,
one at a time. :func:`server_argv` builds the whole command.

Why in this process: TVM's ``rpc_server`` serves each session in a child
process (apache/tvm ``python/tvm/rpc/server.py``, ``_serving``:
``multiprocessing.Process`` per session). Forked, that child fails at its
first CUDA call with ``cudaErrorInitializationError``: the parent has loaded
the CUDA runtime, which does not survive a fork (CUDA C Programming Guide,
"Initialization"). With ``--no-fork`` the child is *spawned* instead: a fresh
Python that imports TVM and initialises CUDA for every session, 6-7 s on the
16-core H200 host, which made each tuning candidate cost 7 s to measure
(16 candidates in 113-122 s, docs/benchmarks.md "GPU hosts"). Here TVM's own
listen loop (``PopenRPCServerState``: the tracker registration, the match
keys) runs in this process with its per-session function replaced by
:func:`serve_in_process`, so CUDA is initialised once and a session costs
its upload and its runs.

What a child bought, kept: a session that outlives its ``-timeout=`` ends the
server (exit :data:`EXIT_SESSION_EXPIRED`), and a session that leaves the GPU
unusable (a kernel's illegal address poisons the CUDA context for the
process) ends it too (exit :data:`EXIT_DEVICE_LOST`). farm's GPU controller
then restarts it, as after any crash (:meth:`farm.controllers.gpu.GpuController.recovery_steps`).

The GPU is chosen with ``CUDA_VISIBLE_DEVICES`` set to its UUID in the
server's environment (CUDA Toolkit documentation, "CUDA Environment
Variables": UUIDs are accepted), so the session's ``cuda(0)`` is that GPU
whatever NVML's and CUDA's index orders say.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

import structlog

from farm.procs import end_group_with_parent

__all__ = ["EXIT_DEVICE_LOST", "EXIT_SESSION_EXPIRED", "main", "serve_in_process",
           "server_argv"]

log = structlog.get_logger(__name__)

#: Exit status of a server whose session outlived the client's ``-timeout=``.
EXIT_SESSION_EXPIRED = 3
#: Exit status of a server whose GPU no longer answers after a session.
EXIT_DEVICE_LOST = 4


def server_argv(*, tracker_host: str, tracker_port: int, key: str, host: str, port: int,
                parent_pid: int, python: str = sys.executable) -> list[str]:
    """The command that runs one GPU's RPC server.

    Args:
        tracker_host: where the tracker listens.
        tracker_port: the tracker's port.
        key: the tracker key the server registers under.
        host: the address the server binds and announces to the tracker.
        port: the server's port (``--port-end`` is ``port + 1``: exactly this one).
        parent_pid: the process whose death ends the server (farmd).
        python: the interpreter.

    Returns:
        An argv list for :func:`farm.procs.spawn`.
    """
    return [python, "-m", "farm.gpu.server", "--parent-pid", str(parent_pid),
            "--host", host, "--port", str(port), "--port-end", str(port + 1),
            "--tracker", f"{tracker_host}:{tracker_port}", "--key", key]


def serve_in_process(sock: Any, addr: Any, opts: dict[str, Any], load_library: Any) -> None:
    """Serve one RPC session on ``sock`` here, in place of TVM's ``_serving``.

    Same arguments as apache/tvm ``python/tvm/rpc/server.py`` ``_serving``
    (0.27): the accepted socket, the client's address, the client's options
    (``timeout``: the session's seconds) and the libraries to load. The
    session runs in a fresh temporary folder, as there, removed after it.

    Ends the process (``os._exit``) when the session outlives its timeout or
    leaves the GPU unusable: see the module docstring.
    """
    from tvm.rpc import _ffi_api
    from tvm.rpc import server as tvm_server

    work = tvm_server.utils.tempdir()
    old_cwd = os.getcwd()
    os.chdir(work.path)  # as TVM's: no file name conflict between sessions
    timeout = opts.get("timeout")
    timer = threading.Timer(float(timeout), _expired, (addr, timeout)) if timeout else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        tvm_server._server_env(load_library, work)
        # The loop owns the descriptor and closes it when the session ends.
        _ffi_api.ServerLoop(sock.detach())
    except Exception as exc:  # noqa: BLE001  a dropped client raises from C++; serve the next
        log.warning("gpu_session_failed", client=str(addr), error=str(exc).splitlines()[0])
    finally:
        if timer is not None:
            timer.cancel()
        os.chdir(old_cwd)
        work.remove()
    if not _gpu_usable():
        log.error("gpu_lost_after_session", client=str(addr), exit=EXIT_DEVICE_LOST)
        os._exit(EXIT_DEVICE_LOST)


def _expired(addr: Any, timeout: Any) -> None:
    log.error("gpu_session_expired", client=str(addr), timeout_s=timeout,
              exit=EXIT_SESSION_EXPIRED)
    os._exit(EXIT_SESSION_EXPIRED)


def _gpu_usable() -> bool:
    """Whether ``cuda(0)`` takes a copy and a sync; True where there is no CUDA device."""
    import numpy as np
    import tvm

    try:
        dev = tvm.cuda(0)
        if not dev.exist:
            return True
        tvm.runtime.tensor(np.zeros(4, dtype="float32"), dev).numpy()
        dev.sync()
    except Exception:  # noqa: BLE001  a poisoned context raises TVMError / RuntimeError
        return False
    return True


def main(argv: Sequence[str] | None = None) -> None:
    """Tie this group to ``--parent-pid``, then register and serve until ended."""
    parser = argparse.ArgumentParser(prog="python -m farm.gpu.server",
                                     description="TVM RPC server that serves sessions in "
                                                 "its own process and ends with its parent")
    parser.add_argument("--parent-pid", type=int, required=True,
                        help="end this process group when this process dies")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--port-end", type=int, required=True)
    parser.add_argument("--tracker", required=True, help="HOST:PORT")
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    end_group_with_parent(args.parent_pid)

    from tvm.rpc import server as tvm_server

    # TVM's listen loop looks its per-session function up by this name (0.27).
    tvm_server._serving = serve_in_process
    tracker_host, _, tracker_port = args.tracker.rpartition(":")
    state = tvm_server.PopenRPCServerState(
        args.host, port=args.port, port_end=args.port_end,
        tracker_addr=(tracker_host, int(tracker_port)), key=args.key)
    state.thread.join()
    # The loop returns only when it failed (its traceback is on stderr): end, to be restarted.
    sys.exit(1)


if __name__ == "__main__":
    main()
