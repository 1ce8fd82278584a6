"""``/api/v1/devices``: the phones as the dashboard shows them, and operators' actions."""

from __future__ import annotations

import pytest
from api_helpers import Api
from device_states import put_state

from farm.queue import DeviceState

FACTS = {"abi": "arm64-v8a", "soc": "SM8150", "sdk": 30}


@pytest.fixture
def phone(api: Api) -> str:
    """A ready phone with one health sample."""
    api.store.upsert_device("p1", api.clock.now(), FACTS)
    put_state(api.store, "p1", DeviceState.READY, "test", api.clock.now())
    api.store.record_health("p1", api.clock.now(), {"battery_pct": 81.0, "battery_temp_c": 31.5,
                                                     "thermal_status": 0})
    return "p1"


class TestRead:
    """GET /api/v1/devices and /devices/{serial}."""

    def test_list(self, api: Api, phone: str) -> None:
        """A phone shows its state, health, facts and latest readings."""
        [row] = api.client.get("/api/v1/devices", headers=api.auth(api.bob)).json()
        assert row["serial"] == phone
        assert (row["state"], row["drained"], row["kind"]) == ("ready", False, "android")
        assert (row["battery_pct"], row["battery_temp_c"], row["thermal_status"]) == (81, 31.5, 0)
        assert row["facts"]["soc"] == "SM8150"
        assert (row["job_id"], row["reservation"]) == (None, None)

    def test_one_with_events(self, api: Api, phone: str) -> None:
        """One phone comes with its recent state changes, newest first."""
        body = api.client.get(f"/api/v1/devices/{phone}", headers=api.auth(api.bob)).json()
        assert body["events"][0]["to_state"] == "ready"

    def test_unknown(self, api: Api) -> None:
        """An unknown serial is a 404."""
        response = api.client.get("/api/v1/devices/nope", headers=api.auth(api.bob))
        assert response.status_code == 404
        assert "nope" in response.json()["error"]


class TestOperatorActions:
    """POST /api/v1/devices/{serial}/drain|undrain|release: operators only."""

    @pytest.mark.parametrize("action", ["drain", "undrain", "release"])
    def test_plain_token_is_forbidden(self, api: Api, phone: str, action: str) -> None:
        """A token without operator rights gets 403 and changes nothing."""
        response = api.client.post(f"/api/v1/devices/{phone}/{action}",
                                   headers=api.auth(api.alice))
        assert response.status_code == 403
        assert "operator" in response.json()["error"]
        assert api.store.get_device(phone).drained is False  # type: ignore[union-attr]

    def test_drain_and_undrain(self, api: Api, phone: str) -> None:
        """An operator drains and undrains; a second drain changes nothing."""
        ops = api.auth(api.operator)
        assert api.client.post(f"/api/v1/devices/{phone}/drain", headers=ops).json()["changed"]
        assert api.store.get_device(phone).drained is True  # type: ignore[union-attr]
        assert not api.client.post(f"/api/v1/devices/{phone}/drain", headers=ops).json()["changed"]
        assert api.client.post(f"/api/v1/devices/{phone}/undrain", headers=ops).json()["changed"]

    def test_release_needs_quarantine(self, api: Api, phone: str) -> None:
        """Releasing a phone that is not quarantined is a 400; a quarantined one is released."""
        ops = api.auth(api.operator)
        response = api.client.post(f"/api/v1/devices/{phone}/release", headers=ops)
        assert (response.status_code, response.json()["error"]) == (
            400, "p1 is not quarantined (it is ready)")
        put_state(api.store, phone, DeviceState.QUARANTINED, "test", api.clock.now())
        assert api.client.post(f"/api/v1/devices/{phone}/release", headers=ops).status_code == 200
        assert api.store.get_device(phone).state is DeviceState.DISCOVERED  # type: ignore[union-attr]

    def test_drain_unknown_phone(self, api: Api) -> None:
        """Draining an unknown phone is a 404, not a new row."""
        response = api.client.post("/api/v1/devices/nope/drain", headers=api.auth(api.operator))
        assert response.status_code == 404
        assert api.store.get_device("nope") is None
