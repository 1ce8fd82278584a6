"""A supervised ``tvm.exec.rpc_proxy`` for devices that connect out, and what is behind it.

Some devices cannot be dialled: the iOS RPC app and a browser page (TVM's web
runtime) open the connection themselves. TVM's proxy takes those connections
(``rpc_server --through-proxy``, the iOS app's "proxy" mode, a websocket) and,
with ``--tracker``, registers each device's key at the tracker under the
proxy's own address (``tvm/rpc/proxy.py``, ``_update_tracker``: a ``PUT`` of the
key with the proxy's port, then ``UPDATE_INFO`` with the key
``server:proxy[key1,key2,...]``). A client asks the tracker for the key as for
any server, is sent to the proxy and paired with the device.

The proxy runs as ``python -m farm.tvm.proxy --parent-pid FARMD --host H
--port P --tracker TH:TP [--web-port W]``, in its own process group, ended
with farmd even by ``kill -9`` (:func:`farm.procs.end_group_with_parent`), as
:mod:`farm.tvm.tracker` runs the tracker. :func:`proxied_keys` reads which keys
are behind it from the tracker's summary; :mod:`farm.controllers.proxy` makes
each a device.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from farm.procs import end_group_with_parent
from farm.tvm.service import ServiceProcess
from farm.tvm.tracker import TrackerSummary

__all__ = ["PROXY_INFO_PREFIX", "ProxyProcess", "main", "proxied_keys"]

#: The tracker key (after ``server:``) under which the proxy lists its devices'
#: keys: ``proxy[key1,key2]`` (``tvm/rpc/proxy.py``, ``_update_tracker``).
PROXY_INFO_PREFIX = "proxy["


def proxied_keys(summary: TrackerSummary, port: int) -> tuple[str, ...]:
    """The keys the proxy listening on ``port`` registered at the tracker; pure.

    Args:
        summary: the tracker's summary (:func:`farm.tvm.tracker.summary`).
        port: the proxy's port (its ``UPDATE_INFO`` names it).

    Returns:
        The keys in the order the proxy listed them. The proxy never removes a
        key once seen: the tracker's queue (``summary.queue(key).free``) says
        whether a device of the key is connected now.
    """
    keys: list[str] = []
    for server in summary.servers:
        if server.port != port or not server.key.startswith(PROXY_INFO_PREFIX):
            continue
        inner = server.key.removeprefix(PROXY_INFO_PREFIX).removesuffix("]")
        keys.extend(k for k in inner.split(",") if k and k not in keys)
    return tuple(keys)


class ProxyProcess(ServiceProcess):
    """A ``tvm.exec.rpc_proxy`` in its own process group; create with :meth:`start`."""

    what = "rpc_proxy"

    @classmethod
    def start(cls, host: str, port: int, tracker: tuple[str, int], *, web_port: int = 0,
              log_path: Path | None = None, ready_timeout_s: float = 30.0) -> ProxyProcess:
        """Start the proxy, registered at ``tracker``, and return once it accepts connections.

        Args:
            host: the address devices connect to.
            port: the port devices connect to (and the tracker sends clients to).
            tracker: the tracker's (host, port).
            web_port: the websocket port for browsers; 0 for none.
            log_path: file for the proxy's output; None discards it.
            ready_timeout_s: how long to wait for it to accept connections.

        Raises:
            TrackerUnreachable: the proxy exited or did not listen in time
                (the port taken, say); it is stopped then.
        """
        argv = [sys.executable, "-m", "farm.tvm.proxy", "--parent-pid", str(os.getpid()),
                "--host", host, "--port", str(port), "--tracker", f"{tracker[0]}:{tracker[1]}",
                "--web-port", str(web_port)]
        return cls._launch(argv, host, port, ready=lambda: _listening(host, port),
                           not_ready="not listening", log_path=log_path,
                           ready_timeout_s=ready_timeout_s)


def _listening(host: str, port: int) -> bool:
    import socket

    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m farm.tvm.proxy``: TVM's rpc_proxy that ends with its parent."""
    parser = argparse.ArgumentParser(prog="python -m farm.tvm.proxy",
                                     description="TVM RPC proxy that ends with its parent")
    parser.add_argument("--parent-pid", type=int, required=True,
                        help="end this process group when this process dies")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tracker", required=True, help="HOST:PORT of the tracker")
    parser.add_argument("--web-port", type=int, default=0, help="0: no websocket server")
    args = parser.parse_args(argv)
    end_group_with_parent(args.parent_pid)
    import logging

    logging.basicConfig(level=logging.INFO)  # as tvm.exec.rpc_proxy does
    from tvm.rpc.proxy import Proxy

    tracker_host, tracker_port = args.tracker.rsplit(":", 1)
    # port_end is exclusive (range(port, port_end)): this pins the port.
    proxy = Proxy(args.host, port=args.port, port_end=args.port + 1, web_port=args.web_port,
                  tracker_addr=(tracker_host, int(tracker_port)))
    proxy.proc.join()


if __name__ == "__main__":
    main()
