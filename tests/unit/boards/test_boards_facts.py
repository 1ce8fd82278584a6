"""Tests for reading a board's facts and health (farm.controllers.board's pure readers)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from farm.boards.commands import SECTION, sections
from farm.controllers.board import facts_from_output, reading_from_output
from farm.errors import PhoneFault

AT = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


def _join(*parts: str) -> str:
    return f"\n{SECTION}\n".join(parts) + "\n"


class TestSections:
    def test_split(self):
        """Parts are split at section lines and keep their inner lines."""
        assert sections(_join("a\nb", "", "c"), 3) == ["a\nb", "", "c"]

    def test_cut_short(self):
        """Output with fewer parts than asked (a command cut short) is a ValueError."""
        with pytest.raises(ValueError, match="expected 3"):
            sections(_join("a", "b"), 3)


class TestFactsFromOutput:
    def test_x86_host(self, board_fixture):
        """The real capture of an x86_64 Debian host: machine, cores, model name, flags."""
        facts = facts_from_output("vb", board_fixture("facts__debian12_x86_64_container.txt"))
        assert facts["abi"] == "x86_64" and facts["abis"] == ["x86_64"]
        assert facts["kind"] == "board"
        assert facts["num_cores"] == 2
        assert facts["model"] == "Intel(R) Xeon(R) Processor"
        assert "avx2" in facts["cpu_flags"]
        assert facts["mem_total_kb"] == 24684096
        assert facts["emulated"] is False

    def test_aarch64_under_qemu_user_mode_is_emulated(self, board_fixture):
        """uname -m of an emulated AArch64 process over an x86 kernel's cpuinfo: aarch64,
        emulated, no CPU flags claimed (the host's say nothing of the emulated CPU).

        Assembled: the x86_64 capture with the ``uname -m`` an AArch64 process gets
        under qemu-aarch64-static 7.2 (QEMU passes the host's /proc/cpuinfo through).
        """
        captured = board_fixture("facts__debian12_x86_64_container.txt").decode()
        machine, rest = captured.split("\n", 1)
        assert machine == "x86_64"
        facts = facts_from_output("va1", "aarch64\n" + rest)
        assert (facts["abi"], facts["emulated"], facts["cpu_flags"]) == ("aarch64", True, [])
        assert facts["model"] == "aarch64 under QEMU user mode on Intel(R) Xeon(R) Processor"

    def test_arm64_board(self, android_fixture):
        """An arm64 kernel's cpuinfo with a device-tree model: model from the tree, Features kept.

        Assembled: cpuinfo and meminfo are real arm64 captures (tests/fixtures/android).
        """
        output = _join("aarch64", "5.10.160-rockchip", "6",
                       android_fixture("proc_cpuinfo__pixel8_shiba_android14.txt"),
                       "Radxa ROCK Pi 4B",
                       android_fixture("proc_meminfo__mtk_tb8168_android13.txt"))
        facts = facts_from_output("rock", output)
        assert facts["abi"] == "aarch64"
        assert facts["model"] == "Radxa ROCK Pi 4B"
        assert facts["num_cores"] == 6
        assert "asimd" in facts["cpu_flags"]
        assert facts["emulated"] is False

    def test_unreadable(self):
        """Cut-short output is a PhoneFault naming the board."""
        with pytest.raises(PhoneFault, match=r"\[vb\] unreadable board facts"):
            facts_from_output("vb", "x86_64\n")


class TestReadingFromOutput:
    def test_host_without_zones(self, board_fixture):
        """No thermal zones: temperature unknown (never guessed); free space from df in MiB."""
        sample = reading_from_output(
            "vb", AT, board_fixture("health__debian12_x86_64_container_no_zones.txt"),
            registered=True)
        assert sample.value("max_zone_temp_c") is None
        assert sample.value("free_storage_mb") == pytest.approx(80203300 / 1024)
        assert sample.app_running is False
        assert sample.registered is True
        assert sample.adb_state == "device"

    def test_hottest_zone_and_running_server(self, android_fixture):
        """The hottest temperature zone counts; a live server group reads as running."""
        types = android_fixture("thermal_zone_types__retroid_pocket5_sm8250.txt")
        temps = android_fixture("thermal_zone_temps__retroid_pocket5_sm8250.txt")
        df = ("Filesystem     1K-blocks     Used Available Use% Mounted on\n"
              "/dev/mmcblk1p5  30358000 10000000  20358000  33% /\n")
        output = _join(types, temps, "0.52 0.58 0.59 1/200 1234",
                       android_fixture("proc_meminfo__mtk_tb8168_android13.txt"), df, "running")
        sample = reading_from_output("rock", AT, output)
        assert sample.value("max_zone_temp_c") is not None and sample.value("max_zone_temp_c") > 20
        assert sample.app_running is True
        assert sample.value("free_storage_mb") == pytest.approx(20358000 / 1024)
        assert sample.registered is None
