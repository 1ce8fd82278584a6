"""Pure health verdicts: each limit, the severity order, and cooling hysteresis."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from farm.config import HealthSettings
from farm.health import Condition, HealthSample, Limits, app_down, cool_enough, verdict

AT = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def healthy(**changes: object) -> HealthSample:
    """A sample of a phone in perfect health, with some readings changed."""
    base = HealthSample(
        serial="emulator-5554",
        at=AT,
        adb_state="device",
        battery_pct=80,
        battery_temp_c=30.0,
        plugged=True,
        thermal_status=0,
        max_zone_temp_c=45.0,
        free_storage_mb=4000.0,
        screen_on=True,
        app_running=True,
        registered=True,
        probe_ok=True,
    )
    return dataclasses.replace(base, **changes)


class TestHealthSample:
    def test_frozen(self) -> None:
        """A sample cannot be changed after the probe made it."""
        with pytest.raises(dataclasses.FrozenInstanceError):
            healthy().battery_pct = 3  # type: ignore[misc]


class TestLimits:
    def test_defaults_documented(self) -> None:
        """The defaults are the documented ones (35 °C, thermal status NONE, 20 %, 500 MiB)."""
        limits = Limits()
        assert (limits.battery_temp_max_c, limits.thermal_status_max) == (35.0, 0)
        assert (limits.battery_min_pct, limits.storage_min_free_mb) == (20, 500.0)

    def test_defaults_match_config_defaults(self) -> None:
        """Limits() and the config's default [health] section agree."""
        assert Limits.from_settings(HealthSettings()) == Limits()

    def test_from_settings_with_overrides(self) -> None:
        """Config values carry over; fields the config lacks come from overrides."""
        settings = HealthSettings(battery_temp_max_c=38.0, zone_temp_max_c=80.0)
        limits = Limits.from_settings(settings, require_plugged=True)
        assert (limits.battery_temp_max_c, limits.zone_temp_max_c) == (38.0, 80.0)
        assert limits.require_plugged

    @pytest.mark.parametrize(
        ("field", "value"),
        [("thermal_status_max", 7), ("thermal_status_max", -1), ("battery_min_pct", 101),
         ("cool_margin_c", -0.5), ("storage_min_free_mb", -1.0)],
    )
    def test_config_rejects_out_of_range(self, field: str, value: float) -> None:
        """The config, the one place limits are checked, refuses a limit out of its range."""
        with pytest.raises(pydantic.ValidationError):
            HealthSettings(**{field: value})


class TestVerdict:
    def test_good(self) -> None:
        """A phone within every limit is good with no reasons."""
        v = verdict(healthy(), Limits())
        assert v.condition is Condition.GOOD
        assert v.reasons == ()
        assert v.reason == ""

    def test_hot_battery_cools_with_reason(self) -> None:
        """A battery above the limit gives cooling with the documented reason text."""
        v = verdict(healthy(battery_temp_c=41.2), Limits())
        assert v.condition is Condition.COOLING
        assert v.reasons == ("battery_temp_c 41.2 > 35",)

    def test_battery_at_limit_is_good(self) -> None:
        """The limit itself is still acceptable (strictly greater cools)."""
        assert verdict(healthy(battery_temp_c=35.0), Limits()).condition is Condition.GOOD

    def test_thermal_status_cools(self) -> None:
        """Any platform throttling above thermal_status_max cools the phone."""
        v = verdict(healthy(thermal_status=2), Limits())
        assert v.condition is Condition.COOLING
        assert v.reasons == ("thermal_status 2 > 0",)

    def test_zone_limit(self) -> None:
        """A zone above its limit cools the phone; zone_temp_max_c=None turns the check off."""
        v = verdict(healthy(max_zone_temp_c=90.0), Limits(zone_temp_max_c=80.0))
        assert v.reasons == ("max_zone_temp_c 90 > 80",)
        assert verdict(healthy(max_zone_temp_c=90.0), Limits(zone_temp_max_c=None)).reasons == ()

    @pytest.mark.parametrize(
        ("changes", "reason"),
        [
            ({"app_running": False}, "app_running false"),
            ({"registered": False}, "registered false"),
            ({"probe_ok": False}, "probe_ok false"),
            ({"fatal_exception_seen": True}, "fatal_exception_seen true"),
            ({"battery_pct": 12}, "battery_pct 12 < 20"),
            ({"free_storage_mb": 320.5}, "free_storage_mb 320.5 < 500"),
            ({"screen_on": False}, "screen_on false"),
        ],
    )
    def test_unhealthy_reasons(self, changes: dict[str, object], reason: str) -> None:
        """Each broken app or phone limit makes the phone unhealthy, saying why."""
        v = verdict(healthy(**changes), Limits())
        assert v.condition is Condition.UNHEALTHY
        assert v.reasons == (reason,)

    def test_unplugged_only_when_required(self) -> None:
        """Running on battery is unhealthy only with require_plugged."""
        assert verdict(healthy(plugged=False), Limits()).condition is Condition.GOOD
        v = verdict(healthy(plugged=False), Limits(require_plugged=True))
        assert v.reasons == ("plugged false",)

    def test_unhealthy_outranks_cooling_and_keeps_both_reasons(self) -> None:
        """A hot phone with a dead app is unhealthy, its heat listed after the app."""
        v = verdict(healthy(app_running=False, battery_temp_c=40.0), Limits())
        assert v.condition is Condition.UNHEALTHY
        assert v.reasons == ("app_running false", "battery_temp_c 40 > 35")

    def test_offline_outranks_everything(self) -> None:
        """A phone adb cannot reach is offline, whatever else the sample says."""
        v = verdict(healthy(adb_state="unauthorized", app_running=False), Limits())
        assert v.condition is Condition.OFFLINE
        assert v.reasons == ("adb_state unauthorized != device",)

    def test_unknown_readings_are_skipped(self) -> None:
        """Readings the probe could not get neither pass nor fail a limit."""
        bare = HealthSample(serial="s", at=AT)
        assert verdict(bare, Limits()) == verdict(bare, Limits(require_plugged=True))
        assert verdict(bare, Limits()).condition is Condition.GOOD

    @given(temp_c=st.floats(min_value=-20, max_value=90), status=st.integers(0, 6))
    def test_heat_alone_never_unhealthy(self, temp_c: float, status: int) -> None:
        """Temperature alone only ever gives good or cooling."""
        v = verdict(healthy(battery_temp_c=temp_c, thermal_status=status), Limits())
        assert v.condition in (Condition.GOOD, Condition.COOLING)
        assert (v.condition is Condition.COOLING) == (temp_c > 35 or status > 0)


class TestAppDown:
    def test_healthy_app(self) -> None:
        """A running, registered, probed app is not down."""
        assert not app_down(healthy())

    def test_dead_app(self) -> None:
        """A missing process puts the app down."""
        assert app_down(healthy(app_running=False))

    def test_offline_phone_app_not_judged(self) -> None:
        """An offline phone's app is not recovered (the phone must come back first)."""
        assert not app_down(healthy(adb_state="offline", app_running=False))


class TestCoolEnough:
    def test_needs_margin_below_limit(self) -> None:
        """A phone just under the limit is not yet cool enough; under limit minus margin is."""
        limits = Limits(battery_temp_max_c=35.0, cool_margin_c=2.0)
        assert not cool_enough(healthy(battery_temp_c=34.0), limits)
        assert cool_enough(healthy(battery_temp_c=33.0), limits)

    def test_thermal_status_must_clear(self) -> None:
        """A throttling platform is never cool enough."""
        assert not cool_enough(healthy(thermal_status=1), Limits())

    @given(temp_c=st.floats(min_value=-20, max_value=90), status=st.integers(0, 6))
    def test_cool_enough_implies_not_cooling(self, temp_c: float, status: int) -> None:
        """Whenever the gate opens, the verdict agrees the phone is not cooling."""
        sample = healthy(battery_temp_c=temp_c, thermal_status=status)
        if cool_enough(sample, Limits()):
            assert verdict(sample, Limits()).condition is Condition.GOOD
