"""Bounds on what a request may carry, checked before it reaches a route or the database.

Two layers, so that no input answers 500 (issue 26):

* :class:`InputBounds`, an ASGI middleware, refuses with 400 a request whose
  path or query string (percent-decoded) holds a control character (NUL among
  them: PostgreSQL refuses it in any string, "A string literal cannot contain
  NUL (0x00) characters") or is longer than :data:`MAX_URL_CHARS`.
* The typed parameters below bound each value where a route declares it: ids
  to the database's ``integer`` (:data:`~farm.queue.models.DB_INT_MAX`; a
  larger one is no id farm ever gave, and PostgreSQL would refuse to compare
  it), serials to their column's 128 characters. A serial may hold ``/``
  (``adb`` names network devices ``host:port``, USB ones by path on some
  hubs), so the routes that take one use Starlette's ``path`` converter.
"""

from __future__ import annotations

import json
from typing import Annotated
from urllib.parse import unquote

from fastapi import Path, Query
from starlette.types import ASGIApp, Receive, Scope, Send

from farm.queue.models import DB_INT_MAX

__all__ = ["MAX_URL_CHARS", "SERIAL_MAX_CHARS", "InputBounds", "JobIdPath", "JobIdQuery",
           "ReasonQuery", "SerialPath", "TextQuery", "bad_input", "send_error"]

#: The longest path plus query string taken, in characters (every URL farm makes is far shorter).
MAX_URL_CHARS = 4096
#: A serial's column holds 128 characters (farm/queue/models.py).
SERIAL_MAX_CHARS = 128
#: The longest free-text query value taken (a run id, a workload, a drain's reason).
TEXT_MAX_CHARS = 512

JobIdPath = Annotated[int, Path(ge=1, le=DB_INT_MAX, description="a job id")]
JobIdQuery = Annotated[int | None, Query(ge=1, le=DB_INT_MAX, description="a job id")]
SerialPath = Annotated[str, Path(min_length=1, max_length=SERIAL_MAX_CHARS,
                                 description="a device's serial (may hold '/')")]
TextQuery = Annotated[str | None, Query(max_length=TEXT_MAX_CHARS)]
ReasonQuery = Annotated[str, Query(max_length=TEXT_MAX_CHARS)]


def bad_input(text: str) -> str | None:
    """Why ``text`` (a decoded path or query) is refused, or None when it is fine."""
    if len(text) > MAX_URL_CHARS:
        return f"the request's address is over {MAX_URL_CHARS} characters"
    for char in text:
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return f"the request's address holds the control character {char!r}"
    return None


async def send_error(send: Send, status: int, message: str) -> None:
    """Answer ``{"error": message}`` with ``status`` from an ASGI middleware."""
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class InputBounds:
    """ASGI middleware: 400 ``{"error": ...}`` for a path or query :func:`bad_input` refuses.

    Args:
        app: the application it guards.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a bad address before routing; pass anything else through."""
        if scope["type"] == "http":
            query = unquote(scope.get("query_string", b"").decode("latin-1"), errors="replace")
            why = bad_input(str(scope.get("path", ""))) or bad_input(query)
            if why is not None:
                await send_error(send, 400, why)
                return
        await self.app(scope, receive, send)
