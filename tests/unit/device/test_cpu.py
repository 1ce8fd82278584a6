"""Tests for farm.device.cpu."""

import pytest

from farm.device.cpu import big_core_mask, parse_cpufreq_max, parse_proc_cpuinfo, parse_proc_meminfo

PIXEL8_MAX_KHZ = [1704000] * 4 + [2367000] * 4 + [2914000]


class TestParseProcCpuinfo:
    def test_pixel8(self, fixture_text):
        """Nine arm64 processors with their parts; no Hardware line on this kernel."""
        info = parse_proc_cpuinfo(fixture_text("proc_cpuinfo__pixel8_shiba_android14.txt"))
        assert [p.index for p in info.processors] == list(range(9))
        assert [p.part for p in info.processors] == ["0xd46"] * 4 + ["0xd4d"] * 4 + ["0xd4e"]
        assert info.processors[0].implementer == "0x41"
        assert info.processors[0].architecture == "8"
        assert "i8mm" in info.processors[8].features
        assert info.hardware == ""

    def test_old_vendor_kernel_hardware_line(self):
        """The machine-wide Hardware line of older kernels is kept."""
        text = (
            "Processor\t: AArch64 Processor rev 4 (aarch64)\n"
            "processor\t: 0\n\n"
            "Hardware\t: Qualcomm SDM845\n"
        )
        info = parse_proc_cpuinfo(text)
        assert info.hardware == "Qualcomm SDM845"
        assert info.extra == {"Processor": "AArch64 Processor rev 4 (aarch64)"}

    def test_no_processor(self):
        """Output without a processor block raises."""
        with pytest.raises(ValueError, match="no 'processor'"):
            parse_proc_cpuinfo("Hardware\t: x\n")


class TestParseCpufreqMax:
    def test_pixel8(self, fixture_text):
        """One kHz value per core in glob order."""
        assert (
            parse_cpufreq_max(
                fixture_text("cpufreq_cpuinfo_max_freq_all__pixel8_shiba_android14.txt")
            )
            == PIXEL8_MAX_KHZ
        )

    @pytest.mark.parametrize("text", ["", "cat: cpu0: No such file\n", "0\n"])
    def test_unreadable(self, text):
        """Empty, non-numeric or zero output raises."""
        with pytest.raises(ValueError, match="cpufreq"):
            parse_cpufreq_max(text)


class TestBigCoreMask:
    def test_prime_core_only(self):
        """On a 4+4+1 Pixel 8 only the 2.91 GHz core (cpu8) is big."""
        assert big_core_mask(PIXEL8_MAX_KHZ) == 0x100

    def test_two_clusters(self):
        """On a 4+4 phone the upper cluster is big."""
        assert big_core_mask([1800000] * 4 + [2400000] * 4) == 0xF0

    def test_homogeneous(self):
        """When every core has the same top frequency all are big."""
        assert big_core_mask([2000000] * 4) == 0xF

    def test_empty(self):
        """No cores raises."""
        with pytest.raises(ValueError):
            big_core_mask([])


class TestParseProcMeminfo:
    def test_mtk(self, fixture_text):
        """Every line is read in kB, including the overflowing VmallocTotal."""
        meminfo = parse_proc_meminfo(fixture_text("proc_meminfo__mtk_tb8168_android13.txt"))
        assert meminfo["MemTotal"] == 3889512
        assert meminfo["MemAvailable"] == 2279120
        assert meminfo["VmallocTotal"] == 262930368
        assert meminfo["CmaFree"] == 0
        assert len(meminfo) == 44

    def test_unitless_counts(self):
        """HugePages lines without a unit keep their count."""
        assert parse_proc_meminfo("MemTotal: 10 kB\nHugePages_Total:       0\n") == {
            "MemTotal": 10,
            "HugePages_Total": 0,
        }

    def test_missing_memtotal(self):
        """Output without MemTotal raises."""
        with pytest.raises(ValueError, match="MemTotal"):
            parse_proc_meminfo("MemFree: 10 kB\n")

    def test_garbage_line(self):
        """An unreadable line raises naming it."""
        with pytest.raises(ValueError, match="oops"):
            parse_proc_meminfo("MemTotal: 10 kB\noops\n")
