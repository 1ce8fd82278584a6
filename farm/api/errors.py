"""The API's errors, and the one mapping between farm's errors and HTTP statuses.

Both sides of the wire use :data:`STATUSES`: the API turns a
:class:`~farm.errors.FarmError` into ``{"error": "<one line>"}`` with the status
of its nearest class (:func:`status_of`), and ``farmctl --server`` turns the
status back into the same class (:func:`error_of`), so a remote ``farmctl``
prints the same ``Error: ...`` and exit code as a local one::

    FarmError      500 (exit 1)
    ├── UserFault  400 (exit 2)
    │   ├── SpecError      400, with ``field`` and ``reason``
    │   ├── NotFound       404
    │   ├── Forbidden      403
    │   ├── Unauthorized   401
    │   ├── Stalled        408: an upload sent nothing for ``[api] upload_read_timeout_s``
    │   └── TooLarge       413
    ├── Conflict   409 (exit 1): the thing is not in a state that allows it
    └── InfraFault 503 (exit 1)

These classes carry no FastAPI import: the local CLI raises them too.
"""

from __future__ import annotations

from typing import Any

from farm.errors import FarmError, InfraFault, SpecError, UserFault

__all__ = ["STATUSES", "Conflict", "Forbidden", "NotFound", "Stalled", "TooLarge",
           "Unauthorized", "error_body", "error_of", "status_of"]


class NotFound(UserFault):
    """No such job, phone or reservation."""


class Forbidden(UserFault):
    """The caller's token does not allow this (another owner's job, an operator's action)."""


class Unauthorized(UserFault):
    """No token, or one the server does not know (``farmctl --server`` only)."""


class TooLarge(UserFault):
    """An upload is larger than the server takes (``[api] upload_max_bytes``)."""


class Stalled(UserFault):
    """An upload's client sent nothing for ``[api] upload_read_timeout_s``; it was cut off."""


class Conflict(FarmError):
    """The job or phone is not in a state that allows the action (cancel an ended job)."""


#: Error class -> HTTP status, most specific first.
STATUSES: tuple[tuple[type[FarmError], int], ...] = (
    (NotFound, 404), (Forbidden, 403), (Unauthorized, 401), (Stalled, 408), (TooLarge, 413),
    (UserFault, 400),
    (Conflict, 409), (InfraFault, 503), (FarmError, 500),
)


def status_of(error: FarmError) -> int:
    """The HTTP status of ``error``: its nearest class in :data:`STATUSES`."""
    return next(status for cls, status in STATUSES if isinstance(error, cls))


def error_body(error: FarmError) -> dict[str, Any]:
    """``{"error": message}``; a :class:`SpecError` adds ``field`` and ``reason``."""
    body: dict[str, Any] = {"error": str(error)}
    if isinstance(error, SpecError):
        body.update(field=error.field, reason=error.reason)
    return body


def error_of(status: int, body: Any) -> FarmError:
    """The error a response of ``status`` with JSON ``body`` stands for.

    A body with ``field`` and ``reason`` becomes the :class:`SpecError` the
    server raised, so ``farmctl enqueue`` can name the flag; FastAPI's own
    refusals (``{"detail": ...}``) are read too.
    """
    if isinstance(body, dict) and isinstance(body.get("field"), str) and isinstance(
            body.get("reason"), str):
        return SpecError(body["field"], body["reason"])
    message = _message(body) or f"HTTP {status}"
    cls = next((c for c, s in STATUSES if s == status), None)
    if cls is None:
        cls = UserFault if 400 <= status < 500 else InfraFault
    return cls(message)


def _message(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    for key in ("error", "detail"):
        value = body.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value:  # FastAPI's validation errors
            first = value[0]
            if isinstance(first, dict):
                where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
                return f"{where}: {first.get('msg', 'invalid')}" if where else str(
                    first.get("msg", "invalid"))
    return ""
