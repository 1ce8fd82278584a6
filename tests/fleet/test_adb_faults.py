"""Faults seen through the real adb server: reboot, unplug, unauthorized, hung shell."""

from __future__ import annotations

import subprocess
import time

import adbutils
import pytest

from farm.clock import wait_until
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet

# The adb server retries a dropped TCP device after 250 ms, then every 3 s
# (AOSP adb/transport.cpp ReconnectHandler); leave room for a few rounds.
BACK_DEADLINE_S = 20.0


def _state(adb_server: AdbServerHandle, serial: str) -> str:
    return adb_server.devices().get(serial, "absent")


class TestReboot:
    def test_adb_reboot_leaves_and_comes_back(
        self, adb_server: AdbServerHandle, make_fleet
    ) -> None:
        """`adb reboot` takes the phone off the server for a while; it returns as device with fresh
        uptime."""
        fleet = make_fleet(1, reboot_away_s=1.0)
        serial = fleet.serials[0]
        phone = fleet.phone(serial)
        reboot_t = time.monotonic()
        done = adb_server.adb("-s", serial, "reboot")
        assert done.returncode == 0, done.stderr
        wait_until(lambda: _state(adb_server, serial) != "device", 10, "phone left the server")
        wait_until(
            lambda: _state(adb_server, serial) == "device", BACK_DEADLINE_S, "phone came back"
        )
        assert fleet.call(phone.android.uptime_s) < time.monotonic() - reboot_t
        assert adb_server.adb("-s", serial, "shell", "echo up").stdout == "up\n"


class TestUnplug:
    def test_unplug_removes_and_replug_restores(
        self, adb_server: AdbServerHandle, make_fleet
    ) -> None:
        """An unplugged phone vanishes from `adb devices` and refuses `adb connect`; replug brings
        it back."""
        fleet = make_fleet(2)
        serial, other = fleet.serials
        fleet.unplug(serial)
        wait_until(lambda: serial not in adb_server.devices(), 10, "unplugged phone vanished")
        assert _state(adb_server, other) == "device"
        refused = adb_server.adb("connect", serial)
        assert "connected to" not in refused.stdout.replace("failed to connect to", "")
        fleet.replug(serial)
        wait_until(
            lambda: _state(adb_server, serial) == "device",
            BACK_DEADLINE_S,
            "replugged phone is device",
        )

    def test_unplug_breaks_a_running_shell(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """A shell running when the cable is pulled ends with an error, not a hang."""
        fleet = make_fleet(1)
        serial = fleet.serials[0]
        fleet.hang_shell(serial)
        proc = subprocess.Popen(
            adb_server.argv("-s", serial, "shell", "echo never"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            wait_until(
                lambda: (
                    fleet.call(lambda: fleet.phone(serial).adbd.stream_count) >= 1
                    and proc.poll() is None
                ),
                5,
                "shell stream open",
            )
            fleet.unplug(serial)
            assert proc.wait(timeout=10) != 0
        finally:
            proc.kill()
            proc.wait()


class TestAuthorization:
    def test_unauthorized_then_allowed_with_host_key(
        self, adb_server: AdbServerHandle, make_fleet
    ) -> None:
        """A phone demanding a key shows `unauthorized`; trusting the server's adbkey.pub makes it
        device."""
        fleet = make_fleet(1)
        serial = fleet.serials[0]
        fleet.set_unauthorized(serial)
        wait_until(
            lambda: _state(adb_server, serial) == "unauthorized",
            BACK_DEADLINE_S,
            "phone unauthorized",
        )
        refused = adb_server.adb("-s", serial, "shell", "echo hi")
        assert refused.returncode == 1
        assert "unauthorized" in refused.stderr
        fleet.authorize(serial, adb_server.public_key())
        wait_until(lambda: _state(adb_server, serial) == "device", 10, "phone authorized")
        assert adb_server.adb("-s", serial, "shell", "echo hi").stdout == "hi\n"

    def test_trusted_key_signs_in_directly(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """With the host key already trusted, a new connection authenticates by signature, no
        prompt."""
        fleet = make_fleet(1)
        serial = fleet.serials[0]
        phone = fleet.phone(serial)
        fleet.set_unauthorized(serial)
        fleet.authorize(serial, adb_server.public_key())
        fleet.unplug(serial)
        fleet.replug(serial)
        wait_until(lambda: _state(adb_server, serial) == "device", BACK_DEADLINE_S, "phone device")
        methods = fleet.call(lambda: [t.auth_method for t in phone.adbd.online_transports])
        assert methods == ["signature"]

    def test_allowing_again_lets_the_host_in(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """set_unauthorized(False) accepts the waiting host, as tapping Allow does."""
        fleet = make_fleet(1)
        serial = fleet.serials[0]
        fleet.set_unauthorized(serial)
        wait_until(
            lambda: _state(adb_server, serial) == "unauthorized",
            BACK_DEADLINE_S,
            "phone unauthorized",
        )
        fleet.set_unauthorized(serial, False)
        wait_until(lambda: _state(adb_server, serial) == "device", 10, "phone device")


class TestHangShell:
    def test_hung_shell_times_out_and_recovers(
        self, adb_server: AdbServerHandle, make_fleet
    ) -> None:
        """While the shell hangs a call times out; after the fault clears the shell answers
        again."""
        fleet = make_fleet(1)
        serial = fleet.serials[0]
        fleet.hang_shell(serial)
        device = adbutils.AdbClient(
            host="127.0.0.1", port=adb_server.port, socket_timeout=1.0
        ).device(serial)
        with pytest.raises(adbutils.AdbTimeout):
            device.shell("echo hi", timeout=1.0)
        with pytest.raises(subprocess.TimeoutExpired):
            adb_server.adb("-s", serial, "shell", "echo hi", timeout_s=1.0)
        fleet.hang_shell(serial, on=False)
        assert adb_server.adb("-s", serial, "shell", "echo hi").stdout == "hi\n"
        # The hung streams were closed when their clients gave up; at most the
        # last shell's stream may still be closing.
        wait_until(
            lambda: fleet.call(lambda: fleet.phone(serial).adbd.stream_count) == 0,
            5,
            "hung streams closed",
        )


class TestManyPhones:
    def test_sixteen_phones_on_one_server(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """16 phones attach to one adb server at once and each answers its own shell."""
        fleet = make_fleet(16)
        client = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port)
        assert {d.serial for d in client.device_list()} == set(fleet.serials)
        for phone in fleet.phones:
            model = client.device(phone.serial).shell("getprop ro.product.model").strip()
            assert model == phone.spec.model
