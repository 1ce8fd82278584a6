"""The virtual phone's sync: service through the real adb server: push, pull, ls, failures."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import adbutils
import pytest

from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet

TEN_MB = 10 * 1024 * 1024


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class TestPushPull:
    def test_adb_push_pull_10mb_keeps_sha256(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path: Path
    ) -> None:
        """A 10 MB random file pushed and pulled back with the adb CLI has the same SHA-256."""
        serial = make_fleet(1).serials[0]
        src = tmp_path / "blob.bin"
        src.write_bytes(os.urandom(TEN_MB))
        pushed = adb_server.adb(
            "-s", serial, "push", str(src), "/data/local/tmp/blob.bin", timeout_s=120
        )
        assert pushed.returncode == 0, pushed.stderr
        dst = tmp_path / "back.bin"
        pulled = adb_server.adb(
            "-s", serial, "pull", "/data/local/tmp/blob.bin", str(dst), timeout_s=120
        )
        assert pulled.returncode == 0, pulled.stderr
        assert _sha256(dst) == _sha256(src)

    def test_adbutils_push_pull_10mb_keeps_sha256(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path: Path
    ) -> None:
        """The same round trip through adbutils' sync client keeps the SHA-256."""
        serial = make_fleet(1).serials[0]
        device = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(serial)
        src = tmp_path / "blob.bin"
        src.write_bytes(os.urandom(TEN_MB))
        device.sync.push(src, "/data/local/tmp/sub/blob.bin")
        dst = tmp_path / "back.bin"
        device.sync.pull("/data/local/tmp/sub/blob.bin", dst)
        assert _sha256(dst) == _sha256(src)

    def test_push_keeps_mode_and_mtime(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path: Path
    ) -> None:
        """`adb push` sets the file's mode (user bits copied to group/other) and mtime as sent."""
        serial = make_fleet(1).serials[0]
        device = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(serial)
        src = tmp_path / "tool"
        src.write_bytes(b"#!/system/bin/sh\n")
        device.sync.push(src, "/data/local/tmp/tool", mode=0o700)
        info = device.sync.stat("/data/local/tmp/tool")
        assert info.mode & 0o777 == 0o777
        assert info.size == len(b"#!/system/bin/sh\n")

    def test_adb_push_keeps_the_host_mtime(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path: Path
    ) -> None:
        """The adb CLI sends the local file's mtime in DONE; the phone's copy keeps it."""
        serial = make_fleet(1).serials[0]
        src = tmp_path / "old.txt"
        src.write_bytes(b"from 2001\n")
        os.utime(src, (1_000_000_000, 1_000_000_000))
        pushed = adb_server.adb("-s", serial, "push", str(src), "/data/local/tmp/old.txt")
        assert pushed.returncode == 0, pushed.stderr
        device = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(serial)
        assert device.sync.stat("/data/local/tmp/old.txt").mtime.timestamp() == 1_000_000_000
        listed = device.shell(["ls", "-l", "/data/local/tmp/old.txt"])
        assert "2001-09-09" in listed

    def test_farm_adb_push_keeps_the_host_mtime(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path: Path
    ) -> None:
        """farm's Adb.push sends the local mtime in DONE too, and the bytes arrive whole."""
        from farm.adb import Adb, AdbServer

        serial = make_fleet(1).serials[0]
        src = tmp_path / "blob.bin"
        src.write_bytes(os.urandom(200_000))
        os.utime(src, (1_100_000_000, 1_100_000_000))
        Adb(AdbServer(port=adb_server.port)).push(serial, src, "/data/local/tmp/blob.bin",
                                                   timeout_s=30)
        device = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(serial)
        info = device.sync.stat("/data/local/tmp/blob.bin")
        assert (info.size, info.mtime.timestamp()) == (200_000, 1_100_000_000)
        assert device.sync.read_bytes("/data/local/tmp/blob.bin") == src.read_bytes()

    def test_farm_adb_push_failure_is_an_adb_error(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path: Path
    ) -> None:
        """A push the phone refuses raises farm's AdbError with adbd's message."""
        from farm.adb import Adb, AdbServer
        from farm.errors import AdbError

        serial = make_fleet(1).serials[0]
        src = tmp_path / "x"
        src.write_bytes(b"x")
        with pytest.raises(AdbError, match="couldn't create file"):
            Adb(AdbServer(port=adb_server.port)).push(serial, src, "/system/x", timeout_s=30)

    def test_ls_lists_pushed_files(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path: Path
    ) -> None:
        """adbutils' sync list (LIST) shows a pushed file with its size."""
        serial = make_fleet(1).serials[0]
        device = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(serial)
        device.sync.push(b"12345", "/data/local/tmp/five.txt")
        entries = {e.path: e.size for e in device.sync.list("/data/local/tmp")}
        assert entries.get("five.txt") == 5


class TestFailures:
    def test_pull_missing_file_fails_like_adbd(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path: Path
    ) -> None:
        """Pulling a missing file fails with the errno adbd sends in STA2, and exit 1."""
        serial = make_fleet(1).serials[0]
        done = adb_server.adb("-s", serial, "pull", "/data/local/tmp/nope", str(tmp_path / "x"))
        assert done.returncode == 1
        assert done.stderr == (
            "adb: error: failed to stat remote object '/data/local/tmp/nope': "
            "No such file or directory\n"
        )

    def test_push_to_full_storage_reports_enospc(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path: Path
    ) -> None:
        """After fill_storage a push fails with 'No space left on device'."""
        fleet = make_fleet(1)
        serial = fleet.serials[0]
        fleet.fill_storage(serial)
        src = tmp_path / "blob.bin"
        src.write_bytes(os.urandom(256 * 1024))
        done = adb_server.adb("-s", serial, "push", str(src), "/data/local/tmp/blob.bin")
        assert done.returncode == 1
        assert "No space left on device" in done.stderr
