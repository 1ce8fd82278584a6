"""``/api/v1/hosts`` and the phones of a dead host shown as unreachable."""

from __future__ import annotations

from api_helpers import Api

from farm.queue import DeviceState


def test_hosts_alive_and_dead(api: Api) -> None:
    """A host silent past ``hosts.dead_after_s`` is dead, and its phones are unreachable."""
    now = api.clock.now()
    api.store.register_host("h-old", "10.0.0.1", 9190, now)
    api.clock.advance(3600)
    api.store.register_host("h-new", "10.0.0.2", 9190, api.clock.now())
    api.store.adopt_device("p1", "h-old", now, dead_after_s=60)
    hosts = api.client.get("/api/v1/hosts", headers=api.auth(api.bob)).json()
    assert {h["host"]["host_id"]: h["alive"] for h in hosts} == {"h-old": False, "h-new": True}
    [phone] = api.client.get("/api/v1/devices", headers=api.auth(api.bob)).json()
    assert (phone["host"], phone["unreachable"]) == ("h-old", True)
    assert phone["state"] == DeviceState.DISCOVERED.value
