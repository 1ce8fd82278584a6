"""Tests for farm.device.facts."""

import pytest

from farm.device.cpu import parse_cpufreq_max, parse_proc_meminfo
from farm.device.facts import DeviceFacts, facts_from
from farm.device.getprop import parse_getprop

PIXEL8_MAX_KHZ = [1704000] * 4 + [2367000] * 4 + [2914000]


class TestFactsFrom:
    def test_mtk_tablet(self, fixture_text):
        """MTK getprop and meminfo give every fact, Mali GPU and Vulkan included."""
        facts = facts_from(
            parse_getprop(fixture_text("getprop__mtk_tb8168_android13.txt")),
            [2000000] * 4,
            parse_proc_meminfo(fixture_text("proc_meminfo__mtk_tb8168_android13.txt")),
            opencl_libs_present=True,
        )
        assert facts == DeviceFacts(
            serial="0123456789ABCDEF",
            model="tb8168p1_64_bsp_k510",
            manufacturer="AXXS",
            soc="MT8168B",
            abi="arm64-v8a",
            abilist=("arm64-v8a", "armeabi-v7a", "armeabi"),
            sdk=33,
            release="13",
            fingerprint="AXXS/vnd_tb8168p1_64_bsp_k510/tb8168p1_64_bsp_k510:13/TQ3A.230805.001.S2/"
            "mp5V424:userdebug/release-keys",
            debuggable=True,
            cores=4,
            big_core_mask=0xF,
            mem_total_kb=3889512,
            opencl=True,
            vulkan=True,
            gpu_egl="mali",
            gpu_vendor="arm",
        )

    def test_motorola(self, fixture_text):
        """Motorola: Snapdragon SoC model, Adreno GPU, user build."""
        facts = facts_from(
            parse_getprop(fixture_text("getprop__motorola_edge20_berlin_android13.txt")),
            [1804800] * 6 + [2400000, 2400000],
            {"MemTotal": 7_500_000},
            False,
        )
        assert (facts.model, facts.manufacturer, facts.soc) == (
            "motorola edge 20",
            "motorola",
            "SM7325",
        )
        assert (facts.gpu_vendor, facts.vulkan, facts.debuggable) == ("qualcomm", True, False)
        assert facts.big_core_mask == 0xC0

    def test_pixel8_with_adb_serial(self, fixture_text):
        """Pixel 8: board platform as SoC fallback, the adb serial overrides ro.serialno."""
        facts = facts_from(
            parse_getprop(fixture_text("getprop__pixel8_shiba_android14_reconstructed.txt")),
            parse_cpufreq_max(
                fixture_text("cpufreq_cpuinfo_max_freq_all__pixel8_shiba_android14.txt")
            ),
            {"MemTotal": 7_800_000},
            False,
            serial="192.168.1.20:5555",
        )
        assert facts.serial == "192.168.1.20:5555"
        assert (facts.soc, facts.sdk, facts.abilist) == ("zuma", 34, ("arm64-v8a",))
        assert (facts.cores, facts.big_core_mask) == (9, 0x100)
        assert (facts.vulkan, facts.gpu_vendor) == (False, "")

    def test_missing_model(self, fixture_text):
        """A missing required property raises naming it."""
        props = parse_getprop(fixture_text("getprop__mtk_tb8168_android13.txt"))
        del props["ro.product.model"]
        with pytest.raises(ValueError, match=r"ro\.product\.model"):
            facts_from(props, PIXEL8_MAX_KHZ, {"MemTotal": 1}, False)

    def test_bad_sdk(self, fixture_text):
        """A non-numeric SDK raises."""
        props = parse_getprop(fixture_text("getprop__mtk_tb8168_android13.txt"))
        props["ro.build.version.sdk"] = "UpsideDownCake"
        with pytest.raises(ValueError, match="not an integer"):
            facts_from(props, PIXEL8_MAX_KHZ, {"MemTotal": 1}, False)

    def test_missing_memtotal(self, fixture_text):
        """meminfo without MemTotal raises."""
        props = parse_getprop(fixture_text("getprop__mtk_tb8168_android13.txt"))
        with pytest.raises(ValueError, match="MemTotal"):
            facts_from(props, PIXEL8_MAX_KHZ, {}, False)
