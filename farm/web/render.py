"""Jinja2 templates of the dashboard, shipped in the package (``farm/web/templates``).

Pages are shells: the data comes from the JSON the page's script polls, so a
page shows nothing the API would not show its token's owner. Every page is
sent with a Content-Security-Policy allowing only this site's scripts: the
scripts are files under ``/static`` (no inline script, no CDN).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import Response

__all__ = ["STATIC_DIR", "TEMPLATES_DIR", "render"]

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"

#: Scripts and data only from this site; Chart.js sets inline styles on its canvas.
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")

_templates = Jinja2Templates(directory=str(TEMPLATES_DIR))


def render(request: Request, name: str, context: dict[str, Any], *,
           status_code: int = 200) -> Response:
    """The template ``name`` rendered with ``context`` (autoescaped HTML)."""
    return _templates.TemplateResponse(
        request, name, context, status_code=status_code,
        headers={"Content-Security-Policy": _CSP, "X-Content-Type-Options": "nosniff",
                 "Cache-Control": "no-store"})
