"""The dashboard's login: a token typed once, kept in an HttpOnly cookie.

``GET /login`` shows a form; ``POST /login`` checks the token
(:meth:`farm.queue.tokens.TokenOps.check_token`) and, if the store knows it,
stores it in the :data:`farm.api.auth.COOKIE` cookie: HttpOnly (page scripts
cannot read it), SameSite=Strict (another site's page cannot make the browser
send it, so a drain button cannot be pressed from elsewhere), Secure when the
request came over HTTPS (a reverse proxy's TLS). The cookie lasts the browser
session. ``GET /logout`` forgets it.

A page request without a valid cookie is sent to ``/login?next=PAGE``
(:func:`page_caller`); the JSON behind the pages answers 401 instead
(:mod:`farm.api.auth`).
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from farm.api.auth import COOKIE, request_token
from farm.api.context import ApiContext, context
from farm.queue.tokens import Caller
from farm.web.render import render

__all__ = ["LoginRequired", "page_caller", "router", "safe_next"]

router = APIRouter()


class LoginRequired(Exception):
    """A page was asked for without a valid token; answered by a redirect to the login.

    Args:
        next_url: the page to come back to after the login.
    """

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


def safe_next(url: str | None) -> str:
    """``url`` if it is a path on this site, else ``/`` (no open redirect to another host)."""
    if not url or not url.startswith("/") or url.startswith(("//", "/\\")):
        return "/"
    return url


def page_caller(request: Request, ctx: Annotated[ApiContext, Depends(context)]) -> Caller:
    """The caller of a page request (a FastAPI dependency).

    Raises:
        LoginRequired: no token, or one the store does not know or has revoked.
    """
    token = request_token(request)
    found = ctx.store.check_token(token, ctx.clock.now()) if token else None
    if found is None:
        query = f"?{request.url.query}" if request.url.query else ""
        raise LoginRequired(request.url.path + query)
    return found


def login_redirect(_request: Request, exc: Exception) -> Response:
    """The handler of :class:`LoginRequired`: 303 to ``/login?next=...``."""
    next_url = exc.next_url if isinstance(exc, LoginRequired) else "/"
    return RedirectResponse("/login?" + urlencode({"next": next_url}),
                            status.HTTP_303_SEE_OTHER)


@router.get("/login", response_class=HTMLResponse, include_in_schema=False)
def login_form(request: Request, next: str = "/") -> Response:  # noqa: A002 - the query's name
    """The login form."""
    return render(request, "login.html", {"next": safe_next(next), "error": None})


@router.post("/login", include_in_schema=False)
def login(request: Request, ctx: Annotated[ApiContext, Depends(context)],
          token: Annotated[str, Form()] = "",
          next: Annotated[str, Form()] = "/") -> Response:  # noqa: A002 - the form's name
    """Check the token; on success set the cookie and go to ``next`` (303), else 401."""
    token = token.strip()
    if not token or ctx.store.check_token(token, ctx.clock.now()) is None:
        return render(request, "login.html",
                      {"next": safe_next(next),
                       "error": "unknown or revoked token" if token else "a token is required"},
                      status_code=status.HTTP_401_UNAUTHORIZED)
    response = RedirectResponse(safe_next(next), status.HTTP_303_SEE_OTHER)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/",
                        secure=request.url.scheme == "https")
    return response


@router.get("/logout", include_in_schema=False)
def logout() -> Response:
    """Forget the cookie and show the login form."""
    response = RedirectResponse("/login", status.HTTP_303_SEE_OTHER)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
