"""`farm-phones serve` and `farm-phones fault` against a private adb server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from farm.clock import wait_until
from farm.procs import signal_group
from farm.virtual.cli import main
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet


class TestServe:
    def test_serve_prints_phones_takes_faults_and_exits_0_on_sigterm(
        self, adb_server: AdbServerHandle, tmp_path: Path
    ) -> None:
        """serve prints one JSON line per attached phone, obeys `fault`, and detaches and exits 0 on
        SIGTERM."""
        data_dir = tmp_path / "phones"
        argv = [
            sys.executable,
            "-c",
            "from farm.virtual.cli import main; main()",
            "serve",
            "--count",
            "2",
            "--network",
            "usb-only",
            "--adb-port",
            str(adb_server.port),
            "--data-dir",
            str(data_dir),
        ]
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            lines = [json.loads(proc.stdout.readline()) for _ in range(2)]
            serials = [line["serial"] for line in lines]
            assert all(line["network"] == "usb-only" and line["model"] for line in lines)
            wait_until(
                lambda: all(adb_server.devices().get(s) == "device" for s in serials),
                10,
                "phones attached",
            )

            runner = CliRunner()
            done = runner.invoke(main, ["fault", serials[0], "unplug", "--data-dir", str(data_dir)])
            assert done.exit_code == 0, done.output
            wait_until(lambda: serials[0] not in adb_server.devices(), 10, "unplugged phone gone")
            done = runner.invoke(main, ["fault", serials[0], "replug", "--data-dir", str(data_dir)])
            assert done.exit_code == 0, done.output
            wait_until(lambda: adb_server.devices().get(serials[0]) == "device", 10, "replugged")
            bad = runner.invoke(
                main, ["fault", "127.0.0.1:1", "reboot", "--data-dir", str(data_dir)]
            )
            assert bad.exit_code == 1

            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
            assert not any(s in adb_server.devices() for s in serials)
            assert not (data_dir / "control.json").exists()
        finally:
            if proc.poll() is None:
                signal_group(proc.pid)
                proc.wait()

    def test_fault_without_serve_fails_with_a_message(self, tmp_path: Path) -> None:
        """fault with no running serve exits 1 and says so."""
        done = CliRunner().invoke(
            main, ["fault", "127.0.0.1:5555", "reboot", "--data-dir", str(tmp_path)]
        )
        assert done.exit_code == 1
        assert "no running farm-phones serve" in done.output
