"""Tests for farm.device.battery."""

from dataclasses import replace

import pytest

from farm.device.battery import BatteryState, Plugged, parse_dumpsys_battery


def _state(**overrides):
    """The AOSP 2024 derived reading, with ``overrides`` applied."""
    return replace(_BASE, **overrides)


_BASE = BatteryState(
    level=87,
    scale=100,
    level_pct=87.0,
    plugged=Plugged.USB,
    status_code=2,
    status="charging",
    health_code=2,
    health="good",
    temp_c=30.1,
    voltage_mv=4350,
    present=True,
    technology="Li-ion",
    updates_stopped=False,
)


class TestParseDumpsysBattery:
    @pytest.mark.parametrize(
        ("name", "expected"),
        [
            ("dumpsys_battery__aosp_2024_derived.txt", _state()),
            (
                "dumpsys_battery__aosp_2024_updates_stopped_derived.txt",
                _state(plugged=Plugged.NONE, updates_stopped=True),
            ),
            (
                "dumpsys_battery__honor_x8b_android14.txt",
                _state(
                    level=100,
                    level_pct=100.0,
                    status_code=5,
                    status="full",
                    temp_c=27.5,
                    voltage_mv=4444,
                    technology="Unknown",
                ),
            ),
            (
                "dumpsys_battery__mtk_tb8168_android13.txt",
                _state(level=58, level_pct=58.0, temp_c=37.0, voltage_mv=4060),
            ),
            (
                "dumpsys_battery__pixel8pro_android16.txt",
                _state(level=22, level_pct=22.0, temp_c=28.0, voltage_mv=3764),
            ),
            (
                "dumpsys_battery__pixelc_dragon_android7.txt",
                _state(level=19, level_pct=19.0, plugged=Plugged.AC, temp_c=27.5, voltage_mv=3764),
            ),
            (
                "dumpsys_battery__xiaomi_redmi_note14_hyperos3.txt",
                _state(
                    level=80,
                    level_pct=80.0,
                    plugged=Plugged.AC,
                    temp_c=36.4,
                    voltage_mv=4228,
                    technology="Li-poly",
                ),
            ),
        ],
    )
    def test_every_fixture(self, fixture_text, name, expected):
        """Each real and derived format, Android 7 to 16, gives exact values."""
        assert parse_dumpsys_battery(fixture_text(name)) == expected

    def test_one_space_lines_do_not_override_values(self, fixture_text):
        """The one-space 'last voltage value sent' line does not replace ``voltage``."""
        state = parse_dumpsys_battery(fixture_text("dumpsys_battery__pixel8pro_android16.txt"))
        assert state.voltage_mv == 3764

    def test_unknown_codes_are_named_by_number(self, fixture_text):
        """A status code outside BatteryManager's list is kept and named ``code_N``."""
        text = fixture_text("dumpsys_battery__mtk_tb8168_android13.txt").replace(
            "status: 2", "status: 9"
        )
        state = parse_dumpsys_battery(text)
        assert (state.status_code, state.status) == (9, "code_9")

    def test_missing_header(self):
        """Output without the service header raises."""
        with pytest.raises(ValueError, match="header"):
            parse_dumpsys_battery("Can't find service: battery\n")

    def test_missing_temperature(self, fixture_text):
        """A missing required line raises naming it."""
        text = fixture_text("dumpsys_battery__mtk_tb8168_android13.txt").replace(
            "  temperature: 370\n", ""
        )
        with pytest.raises(ValueError, match="temperature"):
            parse_dumpsys_battery(text)

    def test_non_numeric_level(self, fixture_text):
        """An unreadable number raises naming the label."""
        text = fixture_text("dumpsys_battery__mtk_tb8168_android13.txt").replace(
            "level: 58", "level: x"
        )
        with pytest.raises(ValueError, match="'level'"):
            parse_dumpsys_battery(text)
