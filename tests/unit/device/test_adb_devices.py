"""Tests for farm.device.adb_devices."""

import pytest

from farm.device.adb_devices import DeviceEntry, parse_devices_l


class TestParseDevicesL:
    def test_derived_long_listing(self, fixture_text):
        """USB, unauthorized, TCP, offline and emulator transports with every key."""
        entries = parse_devices_l(fixture_text("adb_devices_-l__derived.txt"))
        assert entries == [
            DeviceEntry(
                "0123456789ABCDEF",
                "device",
                "1-1.2",
                "vnd_tb8168p1_64_bsp_k510",
                "tb8168p1_64_bsp_k510",
                "tb8168p1_64_bsp_k510",
                3,
            ),
            DeviceEntry("ZY22REDACT", "unauthorized", "1-1.3", transport_id=4),
            DeviceEntry("192.168.1.20:5555", "device", "", "shiba", "Pixel_8", "shiba", 5),
            DeviceEntry("192.168.1.21:5555", "offline", transport_id=6),
            DeviceEntry(
                "emulator-5554",
                "device",
                "",
                "sdk_gphone64_arm64",
                "sdk_gphone64_arm64",
                "emu64a",
                1,
            ),
        ]

    def test_real_linux_lines(self, fixture_text):
        """Real Linux lines: unauthorized shows only usb and transport_id."""
        entries = parse_devices_l(fixture_text("adb_devices_-l__wahoo_real_lines.txt"))
        assert entries == [
            DeviceEntry("43212600473", "unauthorized", "1-2.2", transport_id=39),
            DeviceEntry(
                "W4IZAMAIBASWV4MR",
                "device",
                "1-3",
                "tidy_goertek2601_l",
                "ELEMNT_BOLT",
                "goertek2601_l",
                33,
            ),
        ]

    def test_real_macos_line(self, fixture_text):
        """macOS devpaths end in X."""
        entries = parse_devices_l(fixture_text("adb_devices_-l__macos_unauthorized_real_line.txt"))
        assert entries == [
            DeviceEntry("27211JEGR0XXXX", "unauthorized", "17825792X", transport_id=1)
        ]

    def test_short_form(self, fixture_text):
        """``adb devices`` without -l gives serial and state only."""
        entries = parse_devices_l(fixture_text("adb_devices__derived.txt"))
        assert [(e.serial, e.state) for e in entries] == [
            ("0123456789ABCDEF", "device"),
            ("ZY22REDACT", "unauthorized"),
            ("192.168.1.20:5555", "device"),
            ("192.168.1.21:5555", "offline"),
            ("emulator-5554", "device"),
        ]

    def test_no_permissions_and_daemon_notes(self):
        """The multi-word no-permissions state is kept whole; daemon start notes are skipped."""
        text = (
            "* daemon not running; starting now at tcp:5037\n"
            "* daemon started successfully\n"
            "List of devices attached\n"
            "ABC123                 no permissions"
            " (missing udev rules? user is in the plugdev group);"
            " see [http://developer.android.com/tools/device.html] usb:1-4 transport_id:2\n\n"
        )
        (entry,) = parse_devices_l(text)
        assert entry.state.startswith("no permissions (missing udev rules?")
        assert entry.state.endswith("device.html]")
        assert (entry.usb, entry.transport_id) == ("1-4", 2)

    def test_empty_list(self):
        """A header alone is no device."""
        assert parse_devices_l("List of devices attached\n\n") == []

    def test_missing_header(self):
        """Output without the header raises."""
        with pytest.raises(ValueError, match="header"):
            parse_devices_l("error: cannot connect to daemon\n")
