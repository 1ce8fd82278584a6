"""Hostile path and query values on every route answer a refusal, never 500 (issue 26)."""

from __future__ import annotations

import json
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


#: JSON a careless or hostile client posts: any shape, specs of every kind with junk params.
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
              st.floats(), st.text(max_size=20),
              st.sampled_from(["gemm", "model", "tune", "gpu", "\x00", "9999-12-31T23:59:59-05:00",
                               "0" * 64, "a" * 300])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["kind", "params", "n", "model", "gemm", "sha256", "name",
                                         "devices", "serials", "count", "not_before", "for_s",
                                         "input_shapes", "trials", "serial", "sdk_min", "x"]),
                        inner, max_size=4)),
    max_leaves=10)
_BODIES = [
    ("/api/v1/jobs", st.one_of(_JSON, st.fixed_dictionaries(
        {"spec": st.fixed_dictionaries({"kind": st.sampled_from(["gemm", "model", "tune"]),
                                        "params": _JSON}, optional={"devices": _JSON})},
        optional={"each": _JSON, "wait_for_device": _JSON}))),
    ("/api/v1/reservations", st.one_of(_JSON, st.fixed_dictionaries(
        {"for_s": _JSON}, optional={"serial": _JSON, "abi": _JSON, "sdk_min": _JSON}))),
]


@pytest.mark.parametrize(("path", "bodies"), _BODIES, ids=[path for path, _ in _BODIES])
def test_hostile_bodies_never_answer_500(api: Api, path: str, bodies: Any) -> None:
    """Any JSON posted to the routes that take a body (NaN and 2**70 included) is refused
    with a 4xx or stored, never a 500."""
    client = TestClient(api.client.app, raise_server_exceptions=False)

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(body=bodies, operator=st.booleans())
    def check(body: Any, operator: bool) -> None:
        headers = {**api.auth(api.operator if operator else api.alice),
                   "content-type": "application/json"}
        response = client.post(path, content=json.dumps(body), headers=headers)
        assert response.status_code < 500, (path, body, response.text[:300])

    check()
