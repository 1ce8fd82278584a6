"""The fleet dashboard in the browser, served by the API app (issue 16).

Pages for people (:mod:`farm.web.pages`) behind a token login kept in a
cookie (:mod:`farm.web.login`), polling JSON views (:mod:`farm.web.data`,
built in :mod:`farm.web.views`); scripts, styles and Chart.js are files in
the package (``farm/web/static``), so nothing is fetched from the internet and
nothing is built at run time. :func:`install` adds all of it to the app.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from farm.web import data, login, pages
from farm.web.render import STATIC_DIR

__all__ = ["install"]


def install(app: FastAPI) -> None:
    """Add the dashboard's pages, login, JSON views and static files to ``app``."""
    app.add_exception_handler(login.LoginRequired, login.login_redirect)
    app.include_router(login.router)
    app.include_router(data.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        """The dashboard's icon, served without a token (issue 25).

        Browsers ask for ``/favicon.ico`` by themselves on pages without a
        ``<link rel=icon>`` (the API's JSON, an error page); it was a 404.
        """
        return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")
