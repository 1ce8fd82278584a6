"""Every route but the public ones refuses a request without a valid token."""

from __future__ import annotations

import re
from typing import Any, cast

import pytest
from api_helpers import T0, Api, flat_routes

from farm.serve.app import PUBLIC_PATHS, create_app


def _routes() -> list[tuple[str, str]]:
    """(method, path) of every route the app serves, path parameters filled in."""
    app = create_app(cast(Any, None))
    found = []
    for route in flat_routes(list(app.routes)):
        if route.path in PUBLIC_PATHS:
            continue
        path = re.sub(r"\{[^}]+\}", "1", route.path)
        methods = getattr(route, "methods", None) or {"GET"}
        found += [(method, path) for method in sorted(methods) if method != "HEAD"]
    return found


ROUTES = _routes()


def _refused(response: Any) -> bool:
    """401, or a dashboard page's redirect to the login page."""
    if response.status_code == 303:
        return str(response.headers.get("location", "")).startswith("/login")
    return bool(response.status_code == 401)


class TestEveryRoute:
    """Each route of the app, found from ``app.routes``, so a new one is checked too."""

    def test_routes_were_found(self) -> None:
        """The parametrization sees the resource routes (an empty list would prove nothing)."""
        paths = {path for _, path in ROUTES}
        assert {"/api/v1/devices", "/api/v1/jobs", "/api/v1/jobs/1/cancel"} <= paths

    @pytest.mark.parametrize(("method", "path"), ROUTES)
    def test_no_token_is_refused(self, api: Api, method: str, path: str) -> None:
        """Without a token the answer is 401 with a one-line error."""
        response = api.client.request(method, path, json={}, follow_redirects=False)
        assert _refused(response)
        if response.status_code == 401:
            assert "token" in response.json()["error"]

    @pytest.mark.parametrize(("method", "path"), ROUTES)
    def test_wrong_token_is_refused(self, api: Api, method: str, path: str) -> None:
        """A token the store does not know, in the header or the cookie, is refused."""
        wrong = api.alice[:-4] + "abcd"
        response = api.client.request(method, path, json={}, headers=api.auth(wrong),
                                      follow_redirects=False)
        assert _refused(response)
        api.client.cookies.set("farm_token", "farm_nonsense")  # with the pages' CSRF header
        assert _refused(api.client.request(method, path, json={}, headers={"X-Farm-CSRF": "1"},
                                           follow_redirects=False))

    @pytest.mark.parametrize(("method", "path"), ROUTES)
    def test_revoked_token_is_refused(self, api: Api, method: str, path: str) -> None:
        """A revoked token no longer opens anything."""
        alice = next(t for t in api.store.list_tokens() if t.owner == "alice")
        api.store.revoke_token(alice.id, T0)
        response = api.client.request(method, path, json={}, headers=api.auth(api.alice),
                                      follow_redirects=False)
        assert _refused(response)


class TestPublic:
    """What answers without a token."""

    def test_ping(self, api: Api) -> None:
        """Liveness needs no token."""
        assert api.client.get("/api/v1/ping").json()["ok"] is True

    def test_whoami(self, api: Api) -> None:
        """A valid token is its owner's, by header or by the dashboard's cookie."""
        assert api.client.get("/api/v1/whoami", headers=api.auth(api.bob)).json() == {
            "owner": "bob", "operator": False}
        api.client.cookies.set("farm_token", api.operator)
        assert api.client.get("/api/v1/whoami").json() == {"owner": "ops", "operator": True}
