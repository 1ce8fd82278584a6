"""Tests for farm.device.getprop."""

import pytest

from farm.device.getprop import parse_getprop


class TestParseGetprop:
    def test_mtk_capture_counts_every_property(self, fixture_text):
        """The MTK capture's 1188 lines hold 1186 properties (two values span lines)."""
        props = parse_getprop(fixture_text("getprop__mtk_tb8168_android13.txt"))
        assert len(props) == 1186
        assert next(iter(props)) == "Build.BRAND"
        assert props["ro.product.cpu.abilist"] == "arm64-v8a,armeabi-v7a,armeabi"

    def test_multiline_values_keep_their_newlines(self, fixture_text):
        """A value spanning lines is returned whole, newlines included."""
        props = parse_getprop(fixture_text("getprop__motorola_edge20_berlin_android13.txt"))
        assert props["persist.sys.boot.reason.history"] == (
            "reboot,hardware_reset,1728776411\nreboot,1727208771\n"
            "reboot,1726002861\nreboot,1724940786"
        )
        assert len(props) == 863

    def test_value_ending_in_newline(self, fixture_text):
        """A value whose last character is a newline ends at the bracket on the next line."""
        props = parse_getprop(fixture_text("getprop__mtk_tb8168_android13.txt"))
        assert props["persist.vendor.sys.pq.modeindex"] == "0\n"

    def test_empty_value(self, fixture_text):
        """``[]`` is the empty string."""
        props = parse_getprop(fixture_text("getprop__motorola_edge20_berlin_android13.txt"))
        assert props["ro.hwui.use_vulkan"] == ""

    def test_pixel_reconstruction(self, fixture_text):
        """All 208 properties of the Pixel 8 listing are read."""
        props = parse_getprop(fixture_text("getprop__pixel8_shiba_android14_reconstructed.txt"))
        assert len(props) == 208
        assert props["ro.product.model"] == "Pixel 8"

    def test_missing_final_newline_and_crlf(self):
        """Output trimmed of its last newline, or with PTY line ends, still parses."""
        assert parse_getprop("[a]: [1]\r\n[b]: [x]") == {"a": "1", "b": "x"}

    def test_empty_output_is_an_error(self):
        """Empty output raises instead of returning no properties."""
        with pytest.raises(ValueError, match="empty"):
            parse_getprop("")

    def test_garbage_is_an_error(self):
        """Text that cannot end a property raises, naming where reading stopped."""
        with pytest.raises(ValueError, match=r"cannot read '\[b\]: \[2'"):
            parse_getprop("[a]: [1]\n[b]: [2\nPermission denied\n")

    def test_leading_garbage_is_an_error(self):
        """An error message before the properties raises instead of being skipped."""
        with pytest.raises(ValueError, match="getprop: not found"):
            parse_getprop("getprop: not found\n[a]: [1]\n")
