"""The health sweep's script and the sample it builds from real phone output."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from farm.controllers.android_health import probe_script, sample_from_sections
from farm.device.batch import MARK as _MARK
from farm.device.batch import split_batch as split_sections

FIXTURES = Path(__file__).parents[2] / "fixtures" / "android"
AT = datetime(2026, 1, 1, tzinfo=UTC)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class TestProbeScript:
    def test_every_section_has_a_marker(self) -> None:
        """The script echoes one marker per section, in order."""
        script = probe_script()
        names = ["battery", "thermal", "df", "power", "app", "crash"]
        positions = [script.index(f"echo {_MARK}{name}") for name in names]
        assert positions == sorted(positions)

    def test_split_round_trips(self) -> None:
        """Sections printed after markers come back apart, byte for byte."""
        out = f"{_MARK}battery\nA\nB\n{_MARK}app\n123\n"
        assert split_sections(out) == {"battery": "A\nB\n", "app": "123\n"}


class TestSampleFromSections:
    def test_real_outputs(self) -> None:
        """Battery, thermal, storage and screen readings come from real captures."""
        sections = {
            "battery": fixture("dumpsys_battery__mtk_tb8168_android13.txt"),
            "thermal": fixture(
                "dumpsys_thermalservice__hal2_throttling_status2__memfault_bort.txt"
            ),
            "df": fixture("df_-k_data__honor_x8b_android14.txt"),
            "power": fixture("dumpsys_power__mtk_tb8168_android13_asleep.txt"),
            "app": "",
            "crash": fixture("logcat_crash_fatal_exception__calnotify_emulator.txt"),
        }
        sample, crashes = sample_from_sections("s1", AT, sections)
        assert sample.value("thermal_status") == 2
        assert sample.screen_on is False
        assert sample.app_running is False
        free_mb, battery_c = sample.value("free_storage_mb"), sample.value("battery_temp_c")
        assert free_mb is not None and free_mb > 0
        assert battery_c is not None and 0 < battery_c < 60
        assert crashes == 0  # that crash is another package's

    def test_unreadable_section_is_none(self) -> None:
        """A section that does not parse leaves its fields unknown, not guessed."""
        sample, _ = sample_from_sections("s1", AT, {"battery": "garbage\n", "app": "4242\n"})
        assert sample.value("battery_pct") is None and sample.value("battery_temp_c") is None
        assert sample.app_running is True

    def test_app_section_missing_or_unreadable_is_unknown(self) -> None:
        """No ``app`` section, or one that is not PIDs, is None (not "app down")."""
        missing, _ = sample_from_sections("s1", AT, {"battery": "garbage\n"})
        unreadable, _ = sample_from_sections("s1", AT, {"app": "pidof: not found\n"})
        down, _ = sample_from_sections("s1", AT, {"app": ""})
        assert (missing.app_running, unreadable.app_running, down.app_running) == (
            None,
            None,
            False,
        )
