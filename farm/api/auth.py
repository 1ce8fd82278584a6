"""Who a request comes from: the owner of its token (:mod:`farm.queue.tokens`).

A request carries its token as ``Authorization: Bearer <token>`` (the API,
``farmctl --server``) or in the :data:`COOKIE` cookie (the dashboard, set by
its login page). No token, or one the store does not know, is refused with
401 before any route runs; :func:`operator` further refuses non-operators
with 403.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from farm.api.context import ApiContext, context
from farm.queue.tokens import Caller

__all__ = ["COOKIE", "CallerDep", "OperatorDep", "caller", "operator", "request_token"]

#: The dashboard's cookie holding the token (HttpOnly, SameSite=Strict).
COOKIE = "farm_token"


def request_token(request: Request) -> str | None:
    """The token a request carries: the bearer header first, then the cookie."""
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(COOKIE) or None


def caller(request: Request, ctx: Annotated[ApiContext, Depends(context)]) -> Caller:
    """The request's caller.

    Raises:
        HTTPException: 401 without a token or with one that is unknown or revoked.
    """
    token = request_token(request)
    found = ctx.store.check_token(token, ctx.clock.now()) if token else None
    if found is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "a valid token is required (farmctl token create --owner NAME)" if token is None
            else "unknown or revoked token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return found


def operator(who: Annotated[Caller, Depends(caller)]) -> Caller:
    """The request's caller, who must hold an operator token.

    Raises:
        HTTPException: 401 as :func:`caller`; 403 for a token without operator rights.
    """
    if not who.operator:
        raise HTTPException(status.HTTP_403_FORBIDDEN,
                            f"{who.owner}'s token is not an operator token")
    return who


CallerDep = Annotated[Caller, Depends(caller)]
OperatorDep = Annotated[Caller, Depends(operator)]
