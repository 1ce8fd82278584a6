"""Hostile path and query values on every route answer a refusal, never 500 (issue 26)."""

from __future__ import annotations

import re
from typing import Any, cast
from urllib.parse import quote

import pytest
from api_helpers import Api, flat_routes
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from farm.queue.models import DB_INT_MAX
from farm.serve.app import create_app


def _routes() -> list[tuple[str, str, tuple[str, ...]]]:
    """(method, path template, query parameter names) of every route the app serves."""
    app = create_app(cast(Any, None))
    found = []
    for route in flat_routes(list(app.routes)):
        dependant = getattr(route, "dependant", None)
        names = tuple(sorted({q.alias for q in dependant.query_params})) if dependant else ()
        for method in sorted(getattr(route, "methods", None) or {"GET"}):
            if method != "HEAD" and not route.path.startswith("/static"):
                found.append((method, route.path, names))
    return found


ROUTES = _routes()

#: Values a careless or hostile caller sends: ids past 64 bits, NUL and other control
#: characters, slashes, traversal, encodings, huge and empty strings.
HOSTILE = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.sampled_from(["", "0", "-1", str(DB_INT_MAX + 1), str(2**63), str(2**64), "9" * 40,
                     "1e9", "NaN", "a/b", "/", "..", "../../etc/passwd", "%00", "%2F",
                     "\x00", "a\x00b", "\n", "\u202e", "\U0001f600" * 50, "x" * 5000,
                     "'; DROP TABLE jobs; --", "<script>alert(1)</script>", "true", "[]"]),
    st.text(max_size=200),
)


def _fill(template: str, value: str) -> str:
    """``template`` with each ``{param}`` replaced by ``value`` as one escaped segment."""
    return re.sub(r"\{[^}]+\}", lambda _m: quote(value, safe=""), template)


@pytest.mark.parametrize(("method", "template", "names"), ROUTES,
                         ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_hostile_values_never_answer_500(api: Api, method: str, template: str,
                                         names: tuple[str, ...]) -> None:
    """Any path value and any value of the route's own query parameters (and a stray one)
    gets a 2xx, 3xx or 4xx answer, as the operator who may do everything."""
    client = TestClient(api.client.app, raise_server_exceptions=False)
    headers = api.auth(api.operator)

    @settings(max_examples=8, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(path_value=HOSTILE, query=st.dictionaries(st.sampled_from([*names, "x"]), HOSTILE,
                                                     max_size=3))
    def check(path_value: str, query: dict[str, str]) -> None:
        response = client.request(method, _fill(template, path_value), params=query,
                                  headers=headers, follow_redirects=False)
        assert response.status_code < 500, (method, template, path_value, query,
                                            response.text[:300])

    check()
    assert ROUTES, "the routes were found"
