"""uvicorn serving the API on a thread of farmd.

Why a thread and not a process: the routes read the same :class:`Store`
farmd opened, and farmd already runs its other services (metrics, the
scheduler) on threads; uvicorn's ``Server`` is made to be driven this way
(``should_exit`` ends ``serve``).
"""

from __future__ import annotations

import threading

import structlog
import uvicorn

from farm.api.app import create_app
from farm.api.context import ApiContext
from farm.clock import wait_until
from farm.errors import InfraFault

__all__ = ["ApiServer"]

log = structlog.get_logger(__name__)

_START_DEADLINE_S = 20.0


class ApiServer:
    """The API on ``host:port`` until :meth:`stop`.

    Raises (from :meth:`start`):
        InfraFault: the port cannot be bound, or the server did not start in time.
    """

    def __init__(self, ctx: ApiContext, host: str, port: int) -> None:
        self.host, self.port = host, port
        config = uvicorn.Config(create_app(ctx), host=host, port=port, log_config=None,
                                access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="api", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            self._server.run()
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
