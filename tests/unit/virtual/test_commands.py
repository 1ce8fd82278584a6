"""Command output against the captured fixtures, pm outcomes and the RPC app's logic."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from farm.device.processes import parse_vm_hwm_kb
from farm.virtual.android.cmd_dumpsys import render_battery, render_df
from farm.virtual.android.processes import PS_HEADER
from farm.virtual.android.props import render_getprop
from farm.virtual.android.sysfiles import meminfo_line

from .conftest import fixture_text, install_fake_tvmrpc, run, sh

pytestmark = pytest.mark.timeout(60)


class TestRenderers:
    def test_battery_android13_matches_mtk_capture(self) -> None:
        """The sdk-33 layout with the MTK values reproduces the capture byte for byte."""
        text = render_battery(
            33,
            ac=False,
            usb=True,
            charge_counter_uah=1708680,
            status=2,
            level=58,
            voltage_mv=4060,
            temp_tenths_c=370,
            max_current_ua=0,
            max_voltage_uv=0,
        )
        assert text == fixture_text("dumpsys_battery__mtk_tb8168_android13.txt")

    def test_df_matches_mtk_capture(self) -> None:
        """toybox df widths measured from the cells reproduce the real df output."""
        lines = fixture_text("df__mtk_tb8168_android13.txt").splitlines()[1:]
        rows = []
        for line in lines:
            fs, size, used, avail, _pct, mount = line.split()
            rows.append((fs, int(size), int(used), int(avail), mount))
        assert render_df(rows, human=False) == fixture_text("df__mtk_tb8168_android13.txt")
        assert render_df(rows, human=True) == fixture_text(
            "df_-h__mtk_tb8168_android13_derived.txt"
        )

    def test_getprop_rerenders_motorola_capture(self) -> None:
        """Parsing the Motorola getprop and rendering it again gives the same bytes."""
        text = fixture_text("getprop__motorola_edge20_berlin_android13.txt")
        props = dict(re.findall(r"^\[([^\]]*)\]: \[(.*?)\]$", text, flags=re.M | re.S))
        assert render_getprop(props) == text

    def test_meminfo_line_layout(self) -> None:
        """Labels pad to 16 columns and values to 8, as the kernel prints them."""
        first = fixture_text("proc_meminfo__mtk_tb8168_android13.txt").splitlines(keepends=True)[0]
        assert meminfo_line("MemTotal", 3889512) == first

    def test_ps_header_is_the_captured_one(self) -> None:
        """The ps -A header, trailing spaces included, is the capture's."""
        assert (
            fixture_text("ps_-A__mtk_tb8168_android13_as_root.txt").splitlines(keepends=True)[0]
            == PS_HEADER
        )


class TestSystemCommands:
    def test_getprop_one_key_and_abi(self, phone) -> None:
        """``getprop KEY`` prints the value; the ABI is x86_64 as on the emulator."""
        assert sh(phone, "getprop ro.product.cpu.abi")[1] == "x86_64\n"

    def test_pidof_absent_is_empty_with_status_1(self, phone) -> None:
        """pidof of a missing process prints nothing and exits 1."""
        assert sh(phone, "pidof no.such.process") == (1, "", "")
        assert sh(phone, "pidof system_server")[1] == "832\n"

    def test_proc_status_of_the_rpc_process_reads_its_forked_session(self, phone) -> None:
        """``cat /proc/PID/status`` of a process mirroring a host one gives the real VmHWM of
        the fork doing its work (it touched 64 MiB), not the idle parent's own."""
        script = ("import os, sys, time\n"
                  "if os.fork() == 0:\n"
                  "    held = b'x' * (64 << 20)\n"
                  "    print('ready', flush=True)\n"
                  "time.sleep(60)\n")
        host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                start_new_session=True)
        try:
            assert host.stdout is not None and host.stdout.readline() == b"ready\n"
            phone.processes.spawn("u0_a86", "org.apache.tvm.tvmrpc:RPCProcess", pid=host.pid)
            code, out, _ = sh(phone, f"cat /proc/{host.pid}/status")
            own = parse_vm_hwm_kb(Path(f"/proc/{host.pid}/status").read_text())
        finally:
            os.killpg(host.pid, signal.SIGKILL)
            host.wait(timeout=10)
        assert code == 0 and f"Pid:\t{host.pid}\n" in out
        assert parse_vm_hwm_kb(out) >= 64 * 1024 > own
        assert sh(phone, "cat /proc/99999/status")[0] == 1  # no such process on the phone

    def test_thermal_zone_temps_rise_with_load(self, phone, clock) -> None:
        """Temperatures rise under load over time and status follows thresholds."""
        before = [int(t) for t in sh(phone, "cat /sys/class/thermal/thermal_zone*/temp")[1].split()]
        phone.physics.set_load(1.0)
        clock.advance(600)
        after = [int(t) for t in sh(phone, "cat /sys/class/thermal/thermal_zone*/temp")[1].split()]
        assert all(a > b for a, b in zip(after, before, strict=True))
        phone.heat(60.0)
        assert "Thermal Status: 6" in sh(phone, "dumpsys thermalservice")[1]

    def test_battery_drains_unless_plugged(self, phone, clock) -> None:
        """Unplugged, the level falls over an hour; plugged it rises."""
        phone.set_plugged(False)
        start = int(re.search(r"level: (\d+)", sh(phone, "dumpsys battery")[1]).group(1))
        clock.advance(3600)
        assert int(re.search(r"level: (\d+)", sh(phone, "dumpsys battery")[1]).group(1)) < start

    def test_svc_stayon_sets_setting_7(self, phone) -> None:
        """``svc power stayon true`` prints nothing and sets the setting to 7."""
        assert sh(phone, "svc power stayon true") == (0, "", "")
        assert sh(phone, "settings get global stay_on_while_plugged_in")[1] == fixture_text(
            "settings_get_global_stay_on_while_plugged_in__after_svc_stayon_true.txt")
        assert "mStayOnWhilePluggedInSetting=7" in sh(phone, "dumpsys power")[1]

    def test_uiautomator_screen_off(self, phone) -> None:
        """With the screen off the dump fails with the null-root text."""
        phone.awake = False
        assert sh(phone, "uiautomator dump")[2] == fixture_text(
            "uiautomator_dump__null_root_stderr.txt"
        )

    def test_fill_storage_fails_install(self, phone, tmp_path) -> None:
        """A full /data refuses installs with INSTALL_FAILED_INSUFFICIENT_STORAGE."""
        (phone.storage.root / "data/local/tmp/x.apk").write_bytes(b"PK" * 100)
        phone.fill_storage()
        status, out, _ = sh(phone, "pm install /data/local/tmp/x.apk")
        assert (status, out) == (1, fixture_text("pm_install__failure_insufficient_storage.txt"))


class TestPackageManager:
    def test_unsigned_apk_fails_no_certificates(self, phone, tmp_path) -> None:
        """An unsigned APK fails with the NO_CERTIFICATES text."""
        if shutil.which("aapt") is None:
            pytest.skip("aapt not installed")
        from apk_tools.standin import build_standin_apk

        apk = build_standin_apk(tmp_path / "apk")
        shutil.copy(apk, phone.storage.root / "data/local/tmp/u.apk")
        status, out, _ = sh(phone, "pm install /data/local/tmp/u.apk")
        assert status == 1
        assert re.fullmatch(
            r"Failure \[INSTALL_PARSE_FAILED_NO_CERTIFICATES: Failed to collect certificates from "
            r"/data/app/vmdl\d+\.tmp/base\.apk: Attempt to get length of null array\]\n", out)

    def test_uninstall_missing_package(self, phone) -> None:
        """Uninstalling an absent package prints DELETE_FAILED_INTERNAL_ERROR."""
        assert sh(phone, "pm uninstall not.installed.pkg")[1] == fixture_text(
            "pm_uninstall__failure_not_installed.txt"
        )

    def test_run_as_refuses_non_debuggable(self, phone) -> None:
        """run-as of a non-debuggable app fails with run-as's text."""
        install_fake_tvmrpc(phone, debuggable=False)
        assert (
            sh(phone, "run-as org.apache.tvm.tvmrpc id")[2]
            == "run-as: package not debuggable: org.apache.tvm.tvmrpc\n"
        )


class TestTvmRpcApp:
    def test_rpc_activity_is_not_exported(self, phone) -> None:
        """am start on RPCActivity gets the permission denial and exit 255."""
        install_fake_tvmrpc(phone)
        status, out, err = sh(phone, "am start -n org.apache.tvm.tvmrpc/.RPCActivity")
        assert status == 255
        assert out == "Starting: Intent { cmp=org.apache.tvm.tvmrpc/.RPCActivity }\n"
        assert err.startswith(
            "Security exception: Permission Denial: starting Intent"
            " { flg=0x10000000 cmp=org.apache.tvm.tvmrpc/.RPCActivity } from null (pid="
        )
        assert (
            "not exported from uid 10150\n\njava.lang.SecurityException: Permission Denial" in err
        )

    def test_ui_edits_save_prefs_and_relaunch(self, phone) -> None:
        """Typing into the fields and switching on writes the prefs XML and starts the RPC
        activity."""
        install_fake_tvmrpc(phone)

        async def scenario() -> tuple[str, str, bool]:
            await run(phone, "am start -n org.apache.tvm.tvmrpc/.MainActivity")
            await run(phone, "uiautomator dump /data/local/tmp/d.xml")
            xml = phone.read_file("/data/local/tmp/d.xml").decode()
            for rid, text in (
                ("input_address", "127.0.0.1"),
                ("input_port", "9190"),
                ("input_key", "android"),
            ):
                x1, y1, x2, y2 = map(
                    int,
                    re.search(
                        rf'resource-id="org.apache.tvm.tvmrpc:id/{rid}"[^>]*bounds="\[(\d+),(\d+)\]\[(\d+),(\d+)\]"',
                        xml,
                    ).groups(),
                )
                await run(phone, f"input tap {(x1 + x2) // 2} {(y1 + y2) // 2}; input text {text}")
            x1, y1, x2, y2 = map(
                int,
                re.search(
                    r'switch_persistent"[^>]*bounds="\[(\d+),(\d+)\]\[(\d+),(\d+)\]"', xml
                ).groups(),
            )
            await run(phone, f"input tap {(x1 + x2) // 2} {(y1 + y2) // 2}")
            prefs = (
                await run(
                    phone, "run-as org.apache.tvm.tvmrpc cat shared_prefs/RPCProxyPreference.xml"
                )
            )[1]
            deadline = asyncio.get_running_loop().time() + 5
            while not phone.app.crashes and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            log = (await run(phone, "logcat -d"))[1]
            await phone.on_shutdown()
            return prefs, log, phone.app.rpc_activity

        prefs, log, _ = asyncio.run(scenario())
        assert '<string name="input_port">9190</string>' in prefs
        assert '<boolean name="input_switch" value="true" />' in prefs
        assert "relaunching RPC activity..." in log
        # net=None here, so the RPC process cannot start: the app crashes as the real one would.
        assert "E AndroidRuntime: FATAL EXCEPTION: main" in log

    def test_crash_app_logs_fatal_exception(self, phone) -> None:
        """crash_app() kills the app and leaves FATAL EXCEPTION in logcat."""
        install_fake_tvmrpc(phone)

        async def scenario() -> tuple[str, str]:
            await run(phone, "am start -n org.apache.tvm.tvmrpc/.MainActivity")
            await phone.crash_app()
            return (await run(phone, "logcat -d -b crash"))[1], (
                await run(phone, "pidof org.apache.tvm.tvmrpc")
            )[1]

        log, pids = asyncio.run(scenario())
        assert log.startswith("--------- beginning of crash\n")
        assert "E AndroidRuntime: FATAL EXCEPTION: main\n" in log
        assert re.search(r"E AndroidRuntime: \tat ", log)
        assert pids == ""
