"""Pure lifecycle decisions: adb states and health verdicts to phone states."""

from __future__ import annotations

import pytest

from farm.fleet.lifecycle import health_of, on_adb_state, on_verdict
from farm.health.verdict import Condition, Verdict
from farm.queue.models import DeviceHealth
from farm.queue.models import DeviceState as S


class TestOnAdbState:
    def test_new_phone_is_discovered(self) -> None:
        """A phone first seen as ``device`` is discovered."""
        assert on_adb_state(None, "device").to_state is S.DISCOVERED

    def test_replugged_phone_is_provisioned_again(self) -> None:
        """An offline phone back as ``device`` starts over from discovered."""
        assert on_adb_state(S.OFFLINE, "device").to_state is S.DISCOVERED

    @pytest.mark.parametrize("state", [S.READY, S.BUSY, S.COOLING, S.PROVISIONING])
    def test_unplugged_phone_goes_offline(self, state: S) -> None:
        """Any state but quarantine goes offline when adb loses the phone."""
        move = on_adb_state(state, "absent")
        assert move.to_state is S.OFFLINE and "absent" in move.reason

    def test_unauthorized_says_what_to_do(self) -> None:
        """An unauthorized phone is offline with a hint to accept the key."""
        assert "RSA key" in on_adb_state(S.READY, "unauthorized").reason

    def test_quarantine_survives_replug(self) -> None:
        """Only a person releases a quarantined phone."""
        assert on_adb_state(S.QUARANTINED, "device") is None
        assert on_adb_state(S.QUARANTINED, "absent") is None

    def test_no_move_when_nothing_changes(self) -> None:
        """Transitions are idempotent."""
        assert on_adb_state(S.READY, "device") is None
        assert on_adb_state(S.OFFLINE, "offline") is None


class TestOnVerdict:
    def test_hot_phone_cools(self) -> None:
        """A ready phone over its temperature limit goes cooling, with the reason."""
        move = on_verdict(S.READY, Verdict(Condition.COOLING, ("battery_temp_c 41.2 > 35",)))
        assert move.to_state is S.COOLING and "41.2" in move.reason

    def test_cool_phone_returns_to_ready(self) -> None:
        """A cooling phone judged good is ready again."""
        assert on_verdict(S.COOLING, Verdict(Condition.GOOD)).to_state is S.READY

    def test_cooling_phone_waits_for_the_margin(self) -> None:
        """A good verdict without the cooling margin keeps a cooling phone cooling."""
        assert on_verdict(S.COOLING, Verdict(Condition.GOOD), cool=False) is None

    def test_busy_phone_is_left_alone(self) -> None:
        """A verdict never moves a phone in the middle of an attempt."""
        assert on_verdict(S.BUSY, Verdict(Condition.UNHEALTHY, ("app not running",))) is None

    def test_app_down_is_unhealthy(self) -> None:
        """A ready phone whose app died becomes unhealthy."""
        assert on_verdict(S.READY, Verdict(Condition.UNHEALTHY, ("x",))).to_state is S.UNHEALTHY


class TestHealthOf:
    def test_unhealthy_is_bad_with_its_reasons(self) -> None:
        """An unhealthy verdict makes the phone's health bad, naming why."""
        assert health_of(Verdict(Condition.UNHEALTHY, ("app_running false",))) == (
            DeviceHealth.BAD, "app_running false")

    def test_cooling_is_good_health(self) -> None:
        """A hot phone works; it only needs time: good, with the heat named."""
        health, reason = health_of(Verdict(Condition.COOLING, ("battery_temp_c 41 > 35",)))
        assert health is DeviceHealth.GOOD and "battery_temp_c 41" in reason

    def test_offline_keeps_the_health(self) -> None:
        """adb losing the phone says nothing about its health."""
        assert health_of(Verdict(Condition.OFFLINE, ("adb_state absent != device",))) is None


class TestDraining:
    def test_draining_is_a_flag_not_a_state(self) -> None:
        """No phone is ever put in a draining state: drain is the ``drained`` flag."""
        assert "draining" not in {s.value for s in S}
