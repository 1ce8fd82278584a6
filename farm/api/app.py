"""The API application: ``/api/v1/...`` for programs, the dashboard's pages for people.

Every route but ``/api/v1/ping`` needs a token (:mod:`farm.api.auth`).
Routers are added in :func:`create_app`, one module per resource.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

import farm.web
from farm.api.auth import CallerDep
from farm.api.context import ApiContext

__all__ = ["create_app"]


def create_app(ctx: ApiContext) -> FastAPI:
    """The FastAPI application over ``ctx`` (served by :class:`farm.api.server.ApiServer`)."""
    app = FastAPI(title="farm", version="1", docs_url="/api/docs", redoc_url=None,
                  openapi_url="/api/openapi.json")
    app.state.farm = ctx

    @app.get("/api/v1/ping")
    def ping() -> dict[str, Any]:
        """Liveness, without a token: ``{"ok": true, "host": HOST_ID}``."""
        return {"ok": True, "host": ctx.settings.host_id}

    @app.get("/api/v1/whoami")
    def whoami(who: CallerDep) -> dict[str, Any]:
        """The token's owner and rights."""
        return {"owner": who.owner, "operator": who.operator}

    farm.web.install(app)  # the dashboard's pages, login and their JSON
    return app
