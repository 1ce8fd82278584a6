"""Tests for farm.device.power."""

import pytest

from farm.device.power import PowerState, parse_dumpsys_power, parse_stay_on_setting


class TestParseDumpsysPower:
    def test_mtk_asleep(self, fixture_text):
        """The Android 13 dump: asleep, stay-on off, despite the opaque Display Power line."""
        state = parse_dumpsys_power(fixture_text("dumpsys_power__mtk_tb8168_android13_asleep.txt"))
        assert state == PowerState("Asleep", False, False, 0)

    def test_awake_and_stay_on(self, fixture_text):
        """mWakefulness=Awake is screen on; stay-on values are read."""
        text = (
            fixture_text("dumpsys_power__mtk_tb8168_android13_asleep.txt")
            .replace("mWakefulness=Asleep", "mWakefulness=Awake")
            .replace("mStayOn=false", "mStayOn=true")
            .replace("mStayOnWhilePluggedInSetting=0", "mStayOnWhilePluggedInSetting=7")
        )
        assert parse_dumpsys_power(text) == PowerState("Awake", True, True, 7)

    def test_dozing_is_off(self):
        """Dozing (always-on display) counts as screen off."""
        assert parse_dumpsys_power("  mWakefulness=Dozing\n").screen_on is False

    def test_display_power_fallback(self):
        """Old dumps without mWakefulness use ``Display Power: state=ON``."""
        assert parse_dumpsys_power("Display Power: state=ON\n").screen_on is True

    def test_nothing_readable(self):
        """A dump with neither line raises."""
        with pytest.raises(ValueError, match="mWakefulness"):
            parse_dumpsys_power("POWER MANAGER (dumpsys power)\n\n")


class TestParseStayOnSetting:
    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            ("settings_get_global_stay_on_while_plugged_in__default.txt", 0),
            ("settings_get_global_stay_on_while_plugged_in__after_svc_stayon_true.txt", 7),
        ],
    )
    def test_fixtures(self, fixture_text, name, expected):
        """The default and the value ``svc power stayon true`` sets."""
        assert parse_stay_on_setting(fixture_text(name)) == expected

    def test_null(self):
        """``null`` (never set) is 0."""
        assert parse_stay_on_setting("null\n") == 0

    def test_garbage(self):
        """A non-number raises."""
        with pytest.raises(ValueError, match="not a number"):
            parse_stay_on_setting("true\n")
