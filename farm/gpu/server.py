"""One GPU's TVM RPC server, ended with farmd: ``python -m farm.gpu.server``.

``python -m farm.gpu.server --parent-pid FARMD -- ARGS`` ends its own process
group when farmd dies (:func:`farm.procs.end_group_with_parent`, also on
``kill -9``) and then runs ``python -m tvm.exec.rpc_server ARGS`` in the same
process. :func:`server_argv` builds the whole command; farm always passes
``--no-fork``.

Why ``--no-fork``: without it TVM's server forks a child per session from a
process that has already loaded the CUDA runtime, and CUDA does not survive a
fork: the child's first CUDA call fails with ``cudaErrorInitializationError``
(CUDA C Programming Guide, "Initialization": "the CUDA runtime ... is not
fork-safe"; reported for TVM's RPC server in the issue this part answers,
issue 15, on an H100). With ``--no-fork`` TVM starts each session in a fresh
``popen_worker`` process instead (``tvm/exec/rpc_server.py``: ``no_fork=not
args.fork``), which initialises CUDA itself. Those workers are in the server's
process group, so stopping the group stops them.

The GPU is chosen with ``CUDA_VISIBLE_DEVICES`` set to its UUID in the
server's environment (CUDA Toolkit documentation, "CUDA Environment
Variables": UUIDs are accepted), so the session's ``cuda(0)`` is that GPU
whatever NVML's and CUDA's index orders say.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Sequence

from farm.procs import end_group_with_parent

__all__ = ["main", "server_argv"]


def server_argv(*, tracker_host: str, tracker_port: int, key: str, host: str, port: int,
                parent_pid: int, python: str = sys.executable) -> list[str]:
    """The command that runs one GPU's RPC server under farm's wrapper.

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
    return [python, "-m", "farm.gpu.server", "--parent-pid", str(parent_pid), "--",
            "--no-fork", "--host", host, "--port", str(port), "--port-end", str(port + 1),
            "--tracker", f"{tracker_host}:{tracker_port}", "--key", key]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``--parent-pid``, tie this group to it, then run TVM's rpc_server with the rest."""
    parser = argparse.ArgumentParser(prog="python -m farm.gpu.server",
                                     description="TVM RPC server that ends with its parent")
    parser.add_argument("--parent-pid", type=int, required=True,
                        help="end this process group when this process dies")
    parser.add_argument("server_args", nargs=argparse.REMAINDER,
                        help="-- then the arguments of tvm.exec.rpc_server")
    args = parser.parse_args(argv)
    rest = list(args.server_args)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    end_group_with_parent(args.parent_pid)
    sys.argv = ["tvm.exec.rpc_server", *rest]
    runpy.run_module("tvm.exec.rpc_server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
