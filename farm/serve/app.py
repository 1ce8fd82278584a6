"""The API application: ``/api/v1/...`` for programs, the dashboard's pages for people.

Every route but ``/api/v1/ping`` needs a token (:mod:`farm.api.auth`), the
API's description (``/api/openapi.json``, ``/api/docs``) too. Two middlewares
run before any route: :class:`~farm.api.bounds.InputBounds` refuses an address
with control characters or of absurd length (400), and
:class:`~farm.api.csrf.CsrfGuard` refuses a cross-site state change made with the
dashboard's cookie (403).
Routers are added in :func:`create_app`, one module per resource
(:mod:`farm.api.routes`). Every refusal is ``{"error": "<one line>"}``: a
:class:`~farm.errors.FarmError` with the status of its class
(:func:`farm.api.errors.status_of`), FastAPI's own (401, 404 of an unknown
path, 422 of a malformed request) likewise.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException

import farm.web
from farm.api.auth import CallerDep
from farm.api.bounds import InputBounds
from farm.api.context import ApiContext
from farm.api.csrf import CsrfGuard
from farm.api.errors import error_body, status_of
from farm.api.routes import blobs, devices, hosts, jobs, reservations, results
from farm.errors import FarmError

__all__ = ["PUBLIC_PATHS", "create_app"]

#: The only paths served without a token: liveness and the dashboard's login,
#: logout, static files and icon (farm/web). Every other route refuses a request
#: without a valid token: 401, or a page's redirect to the login
#: (tests/unit/api/test_api_auth.py checks each route of the app).
PUBLIC_PATHS = frozenset({"/api/v1/ping", "/login", "/logout", "/static", "/favicon.ico"})


def _farm_error(_request: Request, exc: FarmError) -> JSONResponse:
    return JSONResponse(error_body(exc), status_code=status_of(exc))


def _http_error(_request: Request, exc: HTTPException) -> JSONResponse:
    return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code,
                        headers=exc.headers)


def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
    first: dict[str, Any] = next(iter(exc.errors()), {})
    where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path"))
    message = str(first.get("msg", "invalid request"))
    return JSONResponse({"error": f"{where}: {message}" if where else message}, status_code=422)


def create_app(ctx: ApiContext) -> FastAPI:
    """The FastAPI application over ``ctx`` (served by :class:`farm.serve.server.ApiServer`)."""
    app = FastAPI(title="farm", version="1", docs_url=None, redoc_url=None,
                  openapi_url=None, swagger_ui_oauth2_redirect_url=None)
    app.state.farm = ctx
    app.add_middleware(CsrfGuard)
    app.add_middleware(InputBounds)  # added last: runs first
    app.exception_handler(FarmError)(_farm_error)
    app.exception_handler(HTTPException)(_http_error)
    app.exception_handler(RequestValidationError)(_invalid)

    @app.get("/api/v1/ping")
    def ping() -> dict[str, Any]:
        """Liveness, without a token: ``{"ok": true, "host": HOST_ID}``."""
        return {"ok": True, "host": ctx.settings.host_id}

    @app.get("/api/v1/whoami")
    def whoami(who: CallerDep) -> dict[str, Any]:
        """The token's owner and rights."""
        return {"owner": who.owner, "operator": who.operator}

    @app.get("/api/openapi.json", include_in_schema=False)
    def openapi(_who: CallerDep) -> dict[str, Any]:
        """The API's OpenAPI description (a token's holder only: it lists every route)."""
        return app.openapi()

    @app.get("/api/docs", include_in_schema=False)
    def docs(_who: CallerDep) -> HTMLResponse:
        """Swagger UI over :func:`openapi` (the dashboard's cookie, or a bearer token)."""
        return get_swagger_ui_html(openapi_url="/api/openapi.json", title="farm API")

    for module in (blobs, devices, hosts, jobs, reservations, results):
        app.include_router(module.router)
    farm.web.install(app)  # the dashboard's pages, login and their JSON
    return app
