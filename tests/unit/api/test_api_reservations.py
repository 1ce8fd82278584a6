"""``/api/v1/reservations``: owners reserve for themselves; only they or an operator end it."""

from __future__ import annotations

from typing import Any

import pytest
from api_helpers import Api
from device_states import put_state

from farm.queue import DeviceState

FACTS = {"abi": "arm64-v8a", "soc": "SM8150", "sdk": 30}


@pytest.fixture
def phones(api: Api) -> list[str]:
    """Two ready phones."""
    for serial in ("p1", "p2"):
        api.store.upsert_device(serial, api.clock.now(), FACTS)
        put_state(api.store, serial, DeviceState.READY, "test", api.clock.now())
    return ["p1", "p2"]


def _reserve(api: Api, token: str, **body: Any) -> Any:
    return api.client.post("/api/v1/reservations", json={"for_s": 3600, **body},
                           headers=api.auth(token))


class TestReserve:
    """POST /api/v1/reservations."""

    def test_reserve_by_serial(self, api: Api, phones: list[str]) -> None:
        """The reservation is the token's owner's and says where to reach the phone."""
        response = _reserve(api, api.alice, serial="p1")
        assert response.status_code == 201, response.text
        body = response.json()
        assert (body["serial"], body["owner"]) == ("p1", "alice")
        assert body["tracker_key"].endswith("-p1")
        assert body["tracker_host"] and body["tracker_port"]
        [row] = [d for d in api.client.get("/api/v1/devices", headers=api.auth(api.bob)).json()
                 if d["serial"] == "p1"]
        assert row["reservation"]["owner"] == "alice"

    def test_reserve_by_selection(self, api: Api, phones: list[str]) -> None:
        """Without a serial, a free phone matching the selection is picked."""
        assert _reserve(api, api.bob, soc="SM8150").json()["serial"] in phones
        assert _reserve(api, api.bob, soc="SM9999").status_code == 400

    def test_taken_phone_is_refused(self, api: Api, phones: list[str]) -> None:
        """A phone another owner holds cannot be reserved."""
        _reserve(api, api.alice, serial="p1")
        response = _reserve(api, api.bob, serial="p1")
        assert response.status_code == 400
        assert "p1" in response.json()["error"]

    @pytest.mark.parametrize("for_s", [0, -5, 10 * 24 * 3600])
    def test_duration_is_bounded(self, api: Api, phones: list[str], for_s: float) -> None:
        """A duration of zero, negative or past the configured maximum is refused."""
        assert _reserve(api, api.alice, serial="p1", for_s=for_s).status_code in (400, 422)


class TestUnreserve:
    """DELETE /api/v1/reservations/{serial}."""

    def test_owner_ends_own(self, api: Api, phones: list[str]) -> None:
        """The owner ends their reservation; it is no longer listed."""
        _reserve(api, api.alice, serial="p1")
        response = api.client.delete("/api/v1/reservations/p1", headers=api.auth(api.alice))
        assert response.status_code == 200
        assert response.json()["ended_at"] is not None
        assert api.client.get("/api/v1/reservations", headers=api.auth(api.alice)).json() == []

    def test_other_owner_is_forbidden(self, api: Api, phones: list[str]) -> None:
        """Bob cannot end alice's reservation: 403, and it stays."""
        _reserve(api, api.alice, serial="p1")
        response = api.client.delete("/api/v1/reservations/p1", headers=api.auth(api.bob))
        assert response.status_code == 403
        assert "alice" in response.json()["error"]
        [still] = api.client.get("/api/v1/reservations", headers=api.auth(api.bob)).json()
        assert still["owner"] == "alice"

    def test_operator_ends_any(self, api: Api, phones: list[str]) -> None:
        """An operator token ends anyone's reservation."""
        _reserve(api, api.alice, serial="p1")
        response = api.client.delete("/api/v1/reservations/p1", headers=api.auth(api.operator))
        assert response.status_code == 200
        assert response.json()["end_reason"] == "unreserved by ops"

    def test_not_reserved_is_404(self, api: Api, phones: list[str]) -> None:
        """Ending a reservation that does not exist is a 404."""
        response = api.client.delete("/api/v1/reservations/p2", headers=api.auth(api.alice))
        assert response.status_code == 404

    def test_expired_is_not_listed(self, api: Api, phones: list[str]) -> None:
        """A reservation past its end is no longer in force."""
        _reserve(api, api.alice, serial="p1", for_s=60)
        api.clock.advance(61)
        assert api.client.get("/api/v1/reservations", headers=api.auth(api.alice)).json() == []
