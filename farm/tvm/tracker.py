"""A supervised ``tvm.exec.rpc_tracker`` and what it knows (``summary``).

The tracker is run as ``python -m farm.tvm.tracker --host H --port P
--parent-pid FARMD``, which runs TVM's ``tvm.rpc.tracker.Tracker`` with
``port_end=P+1`` (``port_end`` is exclusive, ``range(port, port_end)`` in
``tvm/rpc/tracker.py``, so this pins the port). The installed 0.27 has no
``--no-fork``: the tracker forks a ``PopenWorker`` child that holds the socket
and does the work, and that child does not notice its parent's death while it
serves. So the tracker runs in its own process group, :meth:`TrackerProcess.stop`
ends the group, and the wrapper ends its group when farmd dies, even by
``kill -9`` (:func:`farm.procs.end_group_with_parent`): an orphan would keep
the port and make the next farmd's tracker fail to bind.

The tracker never notices a server that vanished without closing its socket
(it keeps listing it and hands out its tickets): a listing in
:func:`summary` says a phone registered, not that it serves; see
:mod:`farm.tvm.probe`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.errors import TrackerUnreachable
from farm.netaddr import free_port
from farm.procs import end_group_with_parent
from farm.tvm import protocol
from farm.tvm.protocol import TrackerCode
from farm.tvm.service import ServiceProcess


@dataclass(frozen=True)
class ServerInfo:
    """One registered RPC server, as the tracker lists it.

    Attributes:
        key: tracker key without the ``server:`` prefix, e.g. ``android``.
        host: address clients will be sent to.
        port: port clients will be sent to (the app reports it as a string; it
            is an int here).
    """

    key: str
    host: str
    port: int


@dataclass(frozen=True)
class QueueInfo:
    """One key's queue: ``free`` servers waiting, ``pending`` requests waiting."""

    key: str
    free: int
    pending: int


@dataclass(frozen=True)
class TrackerSummary:
    """The tracker's SUMMARY reply, parsed."""

    servers: tuple[ServerInfo, ...]
    queues: tuple[QueueInfo, ...]

    def servers_for(self, key: str) -> tuple[ServerInfo, ...]:
        """Servers registered under ``key``."""
        return tuple(s for s in self.servers if s.key == key)

    def queue(self, key: str) -> QueueInfo:
        """Queue state of ``key`` (zeros when the tracker has never seen it)."""
        for queue in self.queues:
            if queue.key == key:
                return queue
        return QueueInfo(key, 0, 0)


def parse_summary(raw: dict[str, Any]) -> TrackerSummary:
    """Parse the dict of a SUMMARY reply (``TrackerServerHandler.summary``).

    ``server_info`` entries look like ``{"key": "server:android", "addr":
    ["127.0.0.1", 5001]}``; the stock Android app sends its port as a string.
    Entries without a usable address are skipped.
    """
    servers = []
    for entry in raw.get("server_info", []):
        key = str(entry.get("key", ""))
        addr = entry.get("addr") or [None, None]
        if not key.startswith("server:") or len(addr) != 2 or addr[0] is None:
            continue
        try:
            port = int(addr[1])
        except (TypeError, ValueError):
            continue
        servers.append(ServerInfo(key.removeprefix("server:"), str(addr[0]), port))
    queues = [
        QueueInfo(str(k), int(v.get("free", 0)), int(v.get("pending", 0)))
        for k, v in sorted(raw.get("queue_info", {}).items())
    ]
    return TrackerSummary(
        tuple(sorted(servers, key=lambda s: (s.key, s.host, s.port))), tuple(queues)
    )


def summary(host: str, port: int, timeout_s: float = 5.0) -> TrackerSummary:
    """Ask the tracker for its servers and queues, within ``timeout_s``.

    Raises:
        TrackerUnreachable: refused, timed out, not a tracker, or a bad reply.
    """
    deadline = time.monotonic() + timeout_s
    try:
        sock = protocol.open_tracker(host, port, deadline)
        with sock:
            reply = protocol.call(sock, [TrackerCode.SUMMARY.value], deadline)
    except (OSError, protocol.FrameError) as exc:
        raise TrackerUnreachable(host, port, f"{type(exc).__name__}: {exc}") from exc
    if not (isinstance(reply, list) and len(reply) == 2 and reply[0] == TrackerCode.SUCCESS):
        raise TrackerUnreachable(host, port, f"bad SUMMARY reply {reply!r}")
    return parse_summary(reply[1])


def ping(host: str, port: int, timeout_s: float = 2.0) -> bool:
    """Whether a tracker answers PING at host:port within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    try:
        with protocol.open_tracker(host, port, deadline) as sock:
            reply = protocol.call(sock, [TrackerCode.PING.value], deadline)
            return bool(reply == TrackerCode.SUCCESS)
    except (OSError, protocol.FrameError):
        return False


class TrackerProcess(ServiceProcess):
    """A ``tvm.exec.rpc_tracker`` in its own process group; create with :meth:`start`."""

    what = "tracker"

    @classmethod
    def start(
        cls,
        host: str = "127.0.0.1",
        port: int | None = None,
        *,
        log_path: Path | None = None,
        ready_timeout_s: float = 30.0,
        stop_asked: threading.Event | None = None,
    ) -> TrackerProcess:
        """Start a tracker and return once it answers PING.

        Args:
            host: address to bind.
            port: port to bind; None picks a free one.
            log_path: file for the tracker's output; None discards it.
            ready_timeout_s: how long to wait for the first PING answer.
            stop_asked: set when the caller is asked to stop: the wait ends.

        Raises:
            TrackerUnreachable: a tracker already answers on the port (its
                owner is not this one), or the new one exited or did not answer
                in time (then it is stopped).
            StopAsked: ``stop_asked`` was set first (the tracker is stopped).
        """
        port = free_port(host) if port is None else port
        if ping(host, port, timeout_s=1.0):
            # Its PING answers would pass for this tracker's, hiding that it cannot bind.
            raise TrackerUnreachable(host, port, "the port is taken by another tracker")
        argv = [sys.executable, "-m", "farm.tvm.tracker",
                "--host", host, "--port", str(port), "--parent-pid", str(os.getpid())]  # fmt: skip
        return cls._launch(argv, host, port, ready=lambda: ping(host, port, timeout_s=1.0),
                           not_ready="no answer to PING", log_path=log_path,
                           ready_timeout_s=ready_timeout_s, stop_asked=stop_asked)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m farm.tvm.tracker``: TVM's tracker, ended with its parent (see the module doc)."""
    parser = argparse.ArgumentParser(prog="python -m farm.tvm.tracker",
                                     description="TVM RPC tracker that ends with its parent")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True,
                        help="end this process group when this process dies")
    args = parser.parse_args(argv)
    end_group_with_parent(args.parent_pid)
    logging.basicConfig(level=logging.INFO)  # as tvm.exec.rpc_tracker does
    from tvm.rpc.tracker import Tracker

    tracker = Tracker(args.host, port=args.port, port_end=args.port + 1)  # its __del__ stops it
    tracker.proc.join()


if __name__ == "__main__":
    main()
