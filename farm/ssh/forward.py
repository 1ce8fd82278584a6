"""SSH remote port forwarding: a port on the board's loopback that reaches a host-side address.

The board-side analogue of ``adb reverse`` for phones: when a board cannot dial
the tracker itself (farm's tracker listens on the host's loopback, or a firewall
is in between), the board's RPC server is pointed at ``127.0.0.1:<port>`` on the
board, and every connection made there is carried back over farm's SSH
connection to the tracker (RFC 4254 section 7.1, ``tcpip-forward``). Each
forwarded connection is pumped by one thread until either side closes.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import Any

import paramiko
import structlog

__all__ = ["open_reverse"]

log = structlog.get_logger(__name__)

_CHUNK = 65536
CONNECT_TIMEOUT_S = 10.0


def _pump(channel: paramiko.Channel, sock: socket.socket) -> None:
    """Copy bytes both ways until one side closes, then close both."""
    ends: list[Any] = [channel, sock]  # select() takes anything with fileno()
    try:
        while True:
            readable, _, _ = select.select(ends, [], [])
            if channel in readable:
                data = channel.recv(_CHUNK)
                if not data:
                    break
                sock.sendall(data)
            if sock in readable:
                data = sock.recv(_CHUNK)
                if not data:
                    break
                channel.sendall(data)
    except (OSError, EOFError, paramiko.SSHException):
        pass  # either side went away: the forwarded connection ends
    finally:
        with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
            channel.close()
        with contextlib.suppress(OSError):
            sock.close()


def open_reverse(transport: paramiko.Transport, remote_port: int,
                 target: tuple[str, int]) -> int:
    """Listen on the board's ``127.0.0.1:remote_port`` and carry connections to ``target``.

    Args:
        transport: the board's SSH transport; the forward lives as long as it.
        remote_port: the board-side port; 0 lets the board's sshd pick one.
        target: the host-side ``(host, port)`` each connection is made to.

    Returns:
        The board-side port.

    Raises:
        paramiko.SSHException: the board's sshd refused the forward
            (``AllowTcpForwarding no``, or the port is taken).
    """
    def handler(channel: paramiko.Channel, _origin: tuple[str, int],
                _server: tuple[str, int]) -> None:
        try:
            sock = socket.create_connection(target, timeout=CONNECT_TIMEOUT_S)
        except OSError as exc:
            log.warning("ssh_forward_connect_failed", target=f"{target[0]}:{target[1]}",
                        reason=str(exc))
            channel.close()
            return
        sock.settimeout(None)
        threading.Thread(target=_pump, args=(channel, sock), name="farm-ssh-forward",
                         daemon=True).start()

    port = transport.request_port_forward("127.0.0.1", remote_port, handler)
    return int(port)
