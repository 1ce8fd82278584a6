"""uvicorn serving the API on a thread of farmd.

Why a thread and not a process: the routes read the same :class:`Store`
farmd opened, and farmd already runs its other services (metrics, the
scheduler) on threads; uvicorn's ``Server`` is made to be driven this way
(``should_exit`` ends ``serve``).
"""

from __future__ import annotations

import socket
import threading

import structlog
import uvicorn

from farm.api.context import ApiContext
from farm.clock import wait_until
from farm.errors import InfraFault
from farm.serve.app import create_app

__all__ = ["ApiServer", "listen"]

log = structlog.get_logger(__name__)

_START_DEADLINE_S = 20.0


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` for :class:`ApiServer` (0 picks a free port).

    farmd binds it first thing, before its tracker and phones take ports of
    their own, so a port chosen free a moment before is still free; uvicorn's
    own bind came seconds later, and once another process had taken the port
    in between it answered only with its exit code ("3"). IPv6 for a host
    with a colon (``::``). ``SO_REUSEADDR`` is set (``socket.create_server``).

    Raises:
        InfraFault: the port cannot be bound (taken, not an address of this host).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=128)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InfraFault(f"the API could not listen on {host}:{port}: {reason}") from exc


class ApiServer:
    """The API on ``host:port``, or on ``sock`` bound by :func:`listen`, until :meth:`stop`.

    Raises (from :meth:`start`):
        InfraFault: the port cannot be bound, or the server did not start in time.
    """

    def __init__(self, ctx: ApiContext, host: str, port: int,
                 sock: socket.socket | None = None) -> None:
        self._sock = sock
        if sock is not None:
            port = sock.getsockname()[1]
        self.host, self.port = host, port
        config = uvicorn.Config(create_app(ctx), host=host, port=port, log_config=None,
                                access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="api", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            self._server.run(sockets=None if self._sock is None else [self._sock])
        except BaseException as exc:  # noqa: BLE001 - uvicorn exits (SystemExit) on a failed bind
            self._error = exc

    def start(self) -> None:
        """Start serving; returns once the socket listens."""
        self._thread.start()
        wait_until(lambda: self._server.started or not self._thread.is_alive(),
                   _START_DEADLINE_S, interval_s=0.02)
        if not self._server.started:
            self._server.should_exit = True
            raise InfraFault(f"the API could not listen on {self.host}:{self.port}"
                             + (f": {self._error}" if self._error else ""))
        if self.port == 0:  # the port the system picked
            self.port = self._server.servers[0].sockets[0].getsockname()[1]
        log.info("api_started", host=self.host, port=self.port)

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        if self._sock is not None:
            self._sock.close()
