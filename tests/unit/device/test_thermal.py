"""Tests for farm.device.thermal."""

import pytest

from farm.device.thermal import (
    CoolingDevice,
    Temperature,
    ThermalZone,
    Threshold,
    parse_dumpsys_thermalservice,
    parse_thermal_zones,
)

N = None


class TestParseDumpsysThermalservice:
    def test_mtk_hidl_thresholds(self, fixture_text):
        """The MTK Android 13 dump: HAL 2.0, 56 cooling devices, HIDL-style thresholds."""
        state = parse_dumpsys_thermalservice(
            fixture_text("dumpsys_thermalservice__mtk_tb8168_android13.txt")
        )
        assert (state.thermal_status, state.thermal_status_name) == (0, "none")
        assert (state.hal_name, state.hal_connected) == ("ThermalHAL 2.0", True)
        assert state.temperatures == (
            Temperature("CPU", 0, "CPU", 45.3, 0),
            Temperature("GPU", 1, "GPU", 45.3, 0),
            Temperature("SKIN", 3, "SKIN", 35.0, 0),
            Temperature("NPU", 9, "NPU", 45.3, 0),
        )
        assert state.cached_temperatures[0] == Temperature("CPU", 0, "CPU", 50.2, 0)
        assert len(state.cooling_devices) == 56
        assert state.cooling_devices[3] == CoolingDevice("mtk-cl-cam00", 6, 0)
        assert state.thresholds[2] == Threshold(
            "SKIN", 3, (N, N, N, 50.0, 70.0, 80.0, 90.0), (N,) * 7
        )

    def test_throttling_under_load(self, fixture_text):
        """Status 2 is 'moderate'; the skin sensor's own status and cooling steps are kept."""
        state = parse_dumpsys_thermalservice(
            fixture_text("dumpsys_thermalservice__hal2_throttling_status2__memfault_bort.txt")
        )
        assert (state.thermal_status, state.thermal_status_name) == (2, "moderate")
        assert Temperature("skin", 3, "SKIN", 44.637, 2) in state.temperatures
        assert state.cooling_devices[0] == CoolingDevice("thermal-cpufreq-6", 2, 11)
        assert state.thresholds[0] == Threshold("battery", 2, (N, N, N, N, N, 65.0, 70.0), (N,) * 7)
        assert state.max_temp_c(0) == 48.2
        assert state.max_temp_c(2) == 43.8

    def test_qualcomm_java_thresholds_and_bcl(self, fixture_text):
        """Java-style thresholds parse; BCL sensors (mV, %) are marked as not temperatures."""
        state = parse_dumpsys_thermalservice(
            fixture_text("dumpsys_thermalservice__qualcomm_hal2__memfault_bort.txt")
        )
        assert len(state.temperatures) == 14
        vbat = next(t for t in state.temperatures if t.name == "vbat")
        assert (vbat.type_name, vbat.value_c, vbat.is_temperature) == ("BCL_VOLTAGE", 4.384, False)
        socd = next(t for t in state.temperatures if t.name == "socd")
        assert socd.is_temperature is False
        assert state.thresholds[7] == Threshold("vbat", 6, (N,) * 7, (N, N, N, 3.2, N, N, 3.0))
        assert len(state.cooling_devices) == 12

    def test_samsung_empty_sections(self, fixture_text):
        """Empty cooling and threshold sections at the end give empty tuples."""
        state = parse_dumpsys_thermalservice(
            fixture_text("dumpsys_thermalservice__samsung_a52_5g_android12.txt")
        )
        assert state.temperatures[0] == Temperature("AP", 0, "CPU", 25.6, 0)
        assert len(state.temperatures) == 9
        assert state.cooling_devices == ()
        assert state.thresholds == ()

    def test_samsung_aidl_hal(self, fixture_text):
        """The AIDL HAL line with two spaces before 'connected' is read."""
        state = parse_dumpsys_thermalservice(
            fixture_text("dumpsys_thermalservice__samsung_aidl_hal__memfault_bort.txt")
        )
        assert (state.hal_name, state.hal_connected) == ("ThermalHAL AIDL 1", True)
        assert state.thresholds[1] == Threshold(
            "SKIN", 3, (36.0, 38.0, 40.0, 42.0, 45.0, N, N), (N,) * 7
        )
        assert state.max_temp_c(3) == 28.2

    def test_no_status_is_an_error(self):
        """Output without 'Thermal Status:' raises."""
        with pytest.raises(ValueError, match="Thermal Status"):
            parse_dumpsys_thermalservice("Can't find service: thermalservice\n")

    def test_status_out_of_range(self, fixture_text):
        """A status outside 0..6 raises."""
        text = fixture_text("dumpsys_thermalservice__mtk_tb8168_android13.txt").replace(
            "Thermal Status: 0", "Thermal Status: 9"
        )
        with pytest.raises(ValueError, match=r"outside 0\.\.6"):
            parse_dumpsys_thermalservice(text)

    def test_unreadable_temperature_line(self, fixture_text):
        """A mangled temperature line raises instead of being skipped."""
        text = fixture_text("dumpsys_thermalservice__mtk_tb8168_android13.txt").replace(
            "\tTemperature{mValue=45.3, mType=0", "\tTemperature{mValue=?, mType=0", 1
        )
        with pytest.raises(ValueError, match="temperature CPU"):
            parse_dumpsys_thermalservice(text)


class TestParseThermalZones:
    def test_retroid_zones(self, fixture_text):
        """70 zones: non-temperature, absent and impossible ones are dropped, the rest in °C."""
        zones = parse_thermal_zones(
            fixture_text("thermal_zone_types__retroid_pocket5_sm8250.txt"),
            fixture_text("thermal_zone_temps__retroid_pocket5_sm8250.txt"),
        )
        types = [zone.type for zone in zones]
        assert len(zones) == 58
        assert zones[0] == ThermalZone("aoss0-usr", 26.9)
        assert ThermalZone("battery", 25.5) in zones
        assert ThermalZone("pm8150_tz", 29.801) in zones
        for dropped in (
            "soc",
            "pm8150b-vbat-lvl0",
            "pm8150b-ibat-lvl0",
            "pm8150l-bcl-lvl0",
            "pm8150l-vph-lvl0",
            "camera-therm-usr",
            "skin-msm-therm-usr",
        ):
            assert dropped not in types
        assert max(zone.temp_c for zone in zones) == 34.6

    def test_line_count_mismatch(self):
        """A zone that failed to read (fewer temps than types) raises."""
        with pytest.raises(ValueError, match="2 types but 1 temperatures"):
            parse_thermal_zones("cpu\nbattery\n", "30000\n")

    def test_non_integer_temperature(self):
        """A temperature that is not an integer raises naming the zone."""
        with pytest.raises(ValueError, match="thermal zone cpu"):
            parse_thermal_zones("cpu\n", "hot\n")
