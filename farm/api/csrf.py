"""Cross-site request refusal for the dashboard's cookie (issue 26).

The dashboard's cookie is ``SameSite=Strict``, but "site" is the registrable
domain, not the origin: a page on another port of the farm host, or on a
sibling subdomain behind the same proxy, is the same site and its form posts
carry the cookie. So a state-changing request (any method but GET, HEAD,
OPTIONS) that carries the cookie must also show it comes from farm's own pages:

* the :data:`HEADER` header, which the pages' script (``farm/web/static/dash.js``)
  sets on every POST. A cross-site form cannot set a header, and a cross-site
  script can only after a CORS preflight, which farm never grants; or
* an ``Origin`` header naming this server (what browsers send with a
  same-origin form post, such as the login form's).

A request without the cookie is not at risk (an API client's ``Authorization:
Bearer`` header is never sent by a browser on its own), so it passes; so does
any request with the bearer header. This is OWASP's "custom request header" and
"verifying origin with standard headers" defence
(cheatsheetseries.owasp.org, Cross-Site Request Forgery Prevention Cheat Sheet).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send

from farm.api.auth import COOKIE
from farm.api.bounds import send_error

__all__ = ["HEADER", "CsrfGuard", "refusal"]

#: The header farm's pages send with each state-changing request.
HEADER = "X-Farm-CSRF"
#: Paths that act on what their form carries, not on the cookie: the login takes
#: the token typed into it (a foreign ``Origin`` is still refused).
COOKIE_FREE_PATHS = frozenset({"/login"})
#: Methods that change nothing (RFC 9110, 9.2.1 "Safe Methods").
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def refusal(method: str, path: str, headers: Headers) -> str | None:
    """Why a request is refused as cross-site, or None when it may pass.

    Args:
        method: the request's HTTP method.
        path: its path.
        headers: its headers.
    """
    if method in SAFE_METHODS or COOKIE not in cookie_parser(headers.get("cookie", "")):
        return None
    if headers.get("authorization", "").lower().startswith("bearer ") or headers.get(HEADER):
        return None
    origin = headers.get("origin")
    if origin is not None and origin != "null":
        if urlsplit(origin).netloc.lower() == headers.get("host", "").lower():
            return None
        return f"cross-site request from {origin} refused (farm's pages send {HEADER})"
    if path in COOKIE_FREE_PATHS:
        return None
    return f"a request with the dashboard's cookie needs the {HEADER} header or its Origin"


class CsrfGuard:
    """ASGI middleware: 403 ``{"error": ...}`` for a request :func:`refusal` refuses.

    Args:
        app: the application it guards.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a cross-site state change; pass anything else through."""
        if scope["type"] == "http":
            why = refusal(str(scope.get("method", "GET")), str(scope.get("path", "")),
                          Headers(scope=scope))
            if why is not None:
                await send_error(send, 403, why)
                return
        await self.app(scope, receive, send)
