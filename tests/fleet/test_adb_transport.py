"""The virtual phone's ADB transport through the real adb server: listing and shell."""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import re
import subprocess

import adbutils
import pytest

from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet


class TestListing:
    def test_devices_long_lists_product_model_device(
        self, adb_server: AdbServerHandle, make_fleet
    ) -> None:
        """`adb devices -l` lists each phone as device with product, model, device and transport
        id."""
        fleet = make_fleet(2)
        out = adb_server.adb("devices", "-l").stdout
        for phone in fleet.phones:
            spec = phone.spec
            # adb replaces every non-alphanumeric byte with "_" (transport.cpp sanitize).
            model = re.sub(r"[^A-Za-z0-9]", "_", spec.model)
            pattern = (
                rf"^{re.escape(phone.serial)}\s+device product:{re.escape(spec.product)} "
                rf"model:{re.escape(model)} device:{re.escape(spec.device)} "
                r"transport_id:\d+$"
            )
            assert re.search(pattern, out, re.MULTILINE), out

    def test_adbutils_sees_features(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """adbutils lists the phone and reads the features from its CNXN banner."""
        fleet = make_fleet(1)
        client = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port)
        device = client.device(fleet.serials[0])
        assert {d.serial for d in client.device_list()} == set(fleet.serials)
        assert {"shell_v2", "cmd", "stat_v2", "ls_v2", "fixed_push_mkdir"} <= set(
            device.get_features().split(",")
        )


class TestShell:
    def test_v2_exit_codes(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """`adb shell` (v2) returns the command's exit status and keeps stderr apart."""
        serial = make_fleet(1).serials[0]
        assert adb_server.adb("-s", serial, "shell", "true").returncode == 0
        assert adb_server.adb("-s", serial, "shell", "false").returncode == 1
        assert adb_server.adb("-s", serial, "shell", "exit 3").returncode == 3
        done = adb_server.adb("-s", serial, "shell", "echo out; echo err >&2")
        assert (done.stdout, done.stderr) == ("out\n", "err\n")

    def test_v1_has_no_exit_code_and_merges_stderr(
        self, adb_server: AdbServerHandle, make_fleet
    ) -> None:
        """`adb shell -x` (v1) exits 0 whatever the command did and merges stderr into stdout."""
        serial = make_fleet(1).serials[0]
        assert adb_server.adb("-s", serial, "shell", "-x", "false").returncode == 0
        done = adb_server.adb("-s", serial, "shell", "-x", "echo err >&2")
        assert (done.returncode, done.stdout, done.stderr) == (0, "err\n", "")

    def test_exec_out_is_raw(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """`adb exec-out` returns raw stdout without newline translation."""
        serial = make_fleet(1).serials[0]
        done = adb_server.adb("-s", serial, "exec-out", "echo hi")
        assert done.stdout == "hi\n"

    def test_adbutils_shell_v1_and_v2(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """adbutils' shell (v1) returns output; shell2(v2=True) returns the exit code."""
        serial = make_fleet(1).serials[0]
        device = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(serial)
        assert device.shell(["echo", "a b"]).strip() == "a b"
        result = device.shell2("echo out; echo err >&2; exit 7", v2=True)
        assert (result.returncode, result.stdout, result.stderr) == (7, "out\n", "err\n")

    def test_stdin_reaches_the_command(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """Bytes piped into `adb shell` arrive as the command's stdin (v2 close-stdin ends it)."""
        serial = make_fleet(1).serials[0]
        done = subprocess.run(
            adb_server.argv("-s", serial, "shell", "cat"),
            input="line1\nline2\n",
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, "line1\nline2\n")

    def test_unknown_command_is_127(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """An unknown command fails in the shell with exit 127 and a message on stderr."""
        serial = make_fleet(1).serials[0]
        done = adb_server.adb("-s", serial, "shell", "frobnicate")
        assert done.returncode == 127
        assert done.stderr.startswith("/system/bin/sh: frobnicate: ")


class TestStreams:
    def test_many_concurrent_streams(self, adb_server: AdbServerHandle, make_fleet) -> None:
        """Sixteen shells at once on one phone each get their own answer."""
        serial = make_fleet(1).serials[0]
        device = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port).device(serial)
        with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
            outs = list(pool.map(lambda i: device.shell(["echo", f"n{i}"]).strip(), range(16)))
        assert outs == [f"n{i}" for i in range(16)]

    def test_large_output_crosses_many_wrte(
        self, adb_server: AdbServerHandle, make_fleet, tmp_path
    ) -> None:
        """A 3 MB file printed by `cat` arrives intact over shell v2 and exec-out."""
        serial = make_fleet(1).serials[0]
        blob = os.urandom(3 * 1024 * 1024)
        (tmp_path / "blob").write_bytes(blob)
        assert (
            adb_server.adb(
                "-s", serial, "push", str(tmp_path / "blob"), "/data/local/tmp/blob"
            ).returncode
            == 0
        )
        for mode in ("shell", "exec-out"):
            done = subprocess.run(
                adb_server.argv("-s", serial, mode, "cat /data/local/tmp/blob"),
                capture_output=True,
                timeout=60,
                check=False,
            )
            assert hashlib.sha256(done.stdout).hexdigest() == hashlib.sha256(blob).hexdigest(), mode
