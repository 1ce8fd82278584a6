"""Inputs bounded before the database, cross-site requests refused, the docs behind a token."""

from __future__ import annotations

import pytest
from api_helpers import Api
from device_states import put_state

from farm.queue import DeviceState

SLASHED = "10.0.0.7:5555/usb"


class TestJobIds:
    """Ids past the database's integer are a one-line 422, not a 500 with a traceback."""

    @pytest.mark.parametrize("path", ["/api/v1/jobs/{}", "/api/v1/jobs/{}/cancel",
                                      "/api/v1/jobs/{}/results",
                                      "/api/v1/dashboard/jobs/{}/trials"])
    def test_beyond_64_bits(self, api: Api, path: str) -> None:
        """2**64 (and 2**31, past PostgreSQL's ``integer``) is refused naming the id."""
        method = "POST" if path.endswith("cancel") else "GET"
        for job_id in (2**64, 2**31):
            response = api.client.request(method, path.format(job_id),
                                          headers=api.auth(api.alice))
            assert response.status_code == 422, response.text
            assert response.json()["error"].startswith("job_id: ")

    def test_results_query(self, api: Api) -> None:
        """``?job=`` beyond the bound is refused too."""
        response = api.client.get(f"/api/v1/results?job={2**70}", headers=api.auth(api.alice))
        assert response.status_code == 422
        assert response.json()["error"].startswith("job: ")


class TestControlCharacters:
    def test_nul_in_path_or_query(self, api: Api) -> None:
        """NUL (refused by PostgreSQL in any string) is a 400 before any route runs."""
        for url in ("/api/v1/devices/a%00b", "/api/v1/jobs?run=a%00b"):
            response = api.client.get(url, headers=api.auth(api.alice))
            assert response.status_code == 400, url
            assert "control character" in response.json()["error"]


class TestSlashedSerial:
    """A serial holding '/' is drained, undrained, released and unreserved by its route."""

    def test_every_action(self, api: Api) -> None:
        """Each route takes the serial quoted as %2F (farmctl, the pages) or bare."""
        api.store.upsert_device(SLASHED, api.clock.now(), {})
        put_state(api.store, SLASHED, DeviceState.READY, "test", api.clock.now())
        ops = api.auth(api.operator)
        for spelt in ("10.0.0.7:5555%2Fusb", SLASHED):
            base = f"/api/v1/devices/{spelt}"
            assert api.client.get(base, headers=ops).json()["serial"] == SLASHED
            drained = api.client.post(f"{base}/drain", headers=ops)
            assert drained.json() == {"serial": SLASHED, "changed": True}, drained.text
            assert api.client.post(f"{base}/undrain", headers=ops).json()["changed"]
            released = api.client.post(f"{base}/release", headers=ops)
            assert (released.status_code, released.json()["error"]) == (
                400, f"{SLASHED} is not quarantined (it is ready)")
            reserved = api.client.post("/api/v1/reservations",
                                       json={"serial": SLASHED, "for_s": 60}, headers=ops)
            assert reserved.status_code == 201, reserved.text
            ended = api.client.delete(f"/api/v1/reservations/{spelt}", headers=ops)
            assert ended.status_code == 200, ended.text
            assert ended.json()["serial"] == SLASHED


class TestDocs:
    def test_docs_need_a_token(self, api: Api) -> None:
        """The OpenAPI description and its page answer 401 without a token, 200 with one."""
        for path in ("/api/openapi.json", "/api/docs"):
            assert api.client.get(path).status_code == 401, path
            assert api.client.get(path, headers=api.auth(api.bob)).status_code == 200, path
        paths = api.client.get("/api/openapi.json", headers=api.auth(api.bob)).json()["paths"]
        assert "/api/v1/devices/{serial}/drain" in paths


class TestCsrf:
    """A state change with the dashboard's cookie needs the pages' header or this origin."""

    @pytest.fixture
    def phone(self, api: Api) -> str:
        api.store.upsert_device("p1", api.clock.now(), {})
        put_state(api.store, "p1", DeviceState.READY, "test", api.clock.now())
        api.client.cookies.set("farm_token", api.operator)
        return "p1"

    def test_cross_origin_form_is_refused(self, api: Api, phone: str) -> None:
        """A form post from another origin with the operator's cookie: 403, nothing drained."""
        response = api.client.post(f"/api/v1/devices/{phone}/drain", data={"reason": "x"},
                                   headers={"Origin": "http://evil.example"})
        assert response.status_code == 403
        assert "cross-site request from http://evil.example refused" in response.json()["error"]
        assert api.store.get_device(phone).drained is False  # type: ignore[union-attr]

    def test_no_origin_nor_header_is_refused(self, api: Api, phone: str) -> None:
        """The cookie alone (an old browser's form sends no Origin) is not enough."""
        response = api.client.post("/api/v1/jobs/1/cancel")
        assert response.status_code == 403
        assert "X-Farm-CSRF" in response.json()["error"]

    @pytest.mark.parametrize("headers", [{"X-Farm-CSRF": "1"}, {"Origin": "http://testserver"}])
    def test_pages_header_or_own_origin_pass(self, api: Api, phone: str,
                                             headers: dict[str, str]) -> None:
        """The pages' script's header, or this server's own origin, lets the cookie act."""
        response = api.client.post(f"/api/v1/devices/{phone}/drain", headers=headers)
        assert response.json() == {"serial": phone, "changed": True}

    def test_bearer_clients_are_unaffected(self, api: Api, phone: str) -> None:
        """An API client's bearer header is never sent by a browser on its own: it passes."""
        response = api.client.post(f"/api/v1/devices/{phone}/drain",
                                   headers={**api.auth(api.operator),
                                            "Origin": "http://elsewhere.example"})
        assert response.status_code == 200
        api.client.cookies.clear()
        assert api.client.post(f"/api/v1/devices/{phone}/undrain",
                               headers=api.auth(api.operator)).json()["changed"]
