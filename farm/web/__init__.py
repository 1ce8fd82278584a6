"""The fleet dashboard in the browser, served by the API app (issue 16).

Pages for people (:mod:`farm.web.pages`) behind a token login kept in a
cookie (:mod:`farm.web.login`), polling JSON views (:mod:`farm.web.data`,
built in :mod:`farm.web.views`); scripts, styles and Chart.js are files in
the package (``farm/web/static``), so nothing is fetched from the internet and
nothing is built at run time. :func:`install` adds all of it to the app.
"""

from __future__ import annotations

from fastapi import FastAPI
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
