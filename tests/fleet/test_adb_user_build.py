"""The adb CLI against a virtual phone that behaves like an Android 14 user build."""

from __future__ import annotations

import subprocess

import pytest

from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet


class TestUserBuild:
    def test_adb_root_is_refused(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """`adb root` prints adbd's production-build refusal and the shell stays uid 2000."""
        serial = make_fleet(1, "usb-only").serials[0]
        done = adb_server.adb("-s", serial, "root")
        assert (done.returncode, done.stdout) == (
            0,
            "adbd cannot run as root in production builds\n",
        )
        assert adb_server.adb("-s", serial, "shell", "id", "-u").stdout.startswith(
            "uid=2000(shell)"
        )

    def test_kill_of_another_apps_process_is_not_permitted(
        self, adb_server: AdbServerHandle, make_fleet
    ) -> None:
        """`adb shell kill PID` of system_server fails with EPERM on stderr, exit 1."""
        serial = make_fleet(1, "usb-only").serials[0]
        pid = adb_server.adb("-s", serial, "shell", "pidof", "system_server").stdout.strip()
        done = adb_server.adb("-s", serial, "shell", "kill", pid)
        assert done.returncode == 1
        assert done.stderr == f"/system/bin/sh: kill: {pid}: Operation not permitted\n"

    def test_adb_logcat_dumps_and_exec_out_too(
        self, adb_server: AdbServerHandle, make_fleet
    ) -> None:
        """`adb logcat -d` (shell's exec) and `adb exec-out logcat -d` (exec: service) dump."""
        serial = make_fleet(1, "usb-only").serials[0]
        shell = adb_server.adb("-s", serial, "logcat", "-d", "-b", "all")
        exec_out = adb_server.adb("-s", serial, "exec-out", "logcat", "-d", "-b", "all")
        assert shell.returncode == 0 and exec_out.returncode == 0, (shell.stderr, exec_out.stderr)
        assert shell.stdout.startswith("--------- beginning of ")
        assert exec_out.stdout.startswith("--------- beginning of ")

    def test_adb_logcat_follows(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """Plain `adb logcat` keeps streaming: a line logged later still arrives."""
        fleet = make_fleet(1, "usb-only")
        serial = fleet.serials[0]
        phone = fleet.phone(serial)
        with subprocess.Popen(adb_server.argv("-s", serial, "logcat", "-s", "FarmTest"),
                              stdout=subprocess.PIPE, text=True) as follower:
            try:
                assert follower.stdout is not None
                fleet.call(lambda: phone.android.logs.log(4242, "I", "FarmTest", "later"))
                line = follower.stdout.readline()
                while line.startswith("---------"):
                    line = follower.stdout.readline()
                assert line.rstrip("\n").endswith("I FarmTest: later")
                assert follower.poll() is None
            finally:
                follower.kill()
