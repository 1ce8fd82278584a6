"""A user build's shell as the shell user: kill, exec, logcat that follows."""

from __future__ import annotations

import asyncio

import pytest

from farm.clock import FakeClock
from farm.device.cpu import parse_proc_cpuinfo
from farm.virtual.adbd.services import root_reply
from farm.virtual.android import AndroidPhone, profiles
from farm.virtual.android.props import build_props, fixture_props, identity_props, render_getprop
from farm.virtual.android.spec import PhoneSpec

from .conftest import CollectIO, install_fake_tvmrpc, run, sh

pytestmark = pytest.mark.timeout(60)


class TestKill:
    def test_another_users_process_is_not_permitted(self, phone) -> None:
        """`kill` of system_server as the shell user fails with EPERM, as mksh prints it."""
        status, out, err = sh(phone, "kill -9 832")
        assert (status, out) == (1, "")
        assert err == "/system/bin/sh: kill: 832: Operation not permitted\n"
        assert sh(phone, "pidof system_server")[1] == "832\n"

    def test_unknown_pid_is_no_such_process(self, phone) -> None:
        """A pid nobody has answers ESRCH."""
        assert sh(phone, "kill 99999")[::2] == (1, "/system/bin/sh: kill: 99999: No such process\n")

    def test_the_shells_own_process_may_be_killed(self, phone) -> None:
        """A process of the shell user is signalled (and gone)."""
        proc = phone.processes.spawn("shell", "sleep", ppid_name="adbd")
        assert sh(phone, f"kill {proc.pid}")[0] == 0
        assert proc.pid not in phone.processes.procs

    def test_an_app_may_kill_its_own_process_under_run_as(self, phone) -> None:
        """run-as the app, its own main process may be killed; as the shell user it may not."""
        install_fake_tvmrpc(phone)

        async def scenario() -> tuple[tuple[int, str, str], int, str]:
            await run(phone, "am start -n org.apache.tvm.tvmrpc/.MainActivity")
            pid = phone.app.main_pid
            assert pid is not None
            as_shell = await run(phone, f"kill {pid}")
            as_app = (await run(phone, f"run-as org.apache.tvm.tvmrpc kill {pid}"))[0]
            left = (await run(phone, "pidof org.apache.tvm.tvmrpc"))[1]
            await phone.on_shutdown()
            return as_shell, as_app, left

        as_shell, as_app, left = asyncio.run(scenario())
        assert as_shell[0] == 1 and as_shell[2].endswith(": Operation not permitted\n")
        assert (as_app, left) == (0, "")


class TestExec:
    def test_exec_runs_the_command_as_the_shell(self, phone) -> None:
        """`exec CMD` gives CMD's output and status and ends the script (adb logcat's form)."""
        status, out, _ = sh(
            phone, 'export ANDROID_LOG_TAGS="" ; exec getprop ro.build.type; echo no'
        )
        assert (status, out) == (0, "user\n")
        assert sh(phone, "exec false; echo no")[:2] == (1, "")


class TestLogcatFollow:
    def test_without_d_new_entries_stream_until_cancelled(self, phone) -> None:
        """`logcat` prints the buffer, then each new entry, until its reader goes away."""

        async def scenario() -> str:
            phone.logs.log(100, "I", "Before", "old line")
            io = CollectIO()
            task = asyncio.ensure_future(phone.shell("exec logcat -s After Before", io))
            while b"old line" not in io.stdout:
                await asyncio.sleep(0.01)
            phone.logs.log(101, "W", "After", "new line")
            while b"new line" not in io.stdout:
                await asyncio.sleep(0.01)
            assert not task.done()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return io.stdout.decode()

        out = asyncio.run(scenario())
        assert out.count("--------- beginning of main\n") == 1
        assert out.index("old line") < out.index("W After   : new line")

    def test_d_dumps_and_exits(self, phone) -> None:
        """`logcat -d` returns once the buffer is printed."""
        phone.logs.log(100, "I", "Tag", "only line")
        status, out, _ = sh(phone, "logcat -d -s Tag")
        assert status == 0 and out.endswith("I Tag     : only line\n")


class TestAdbRoot:
    def test_user_build_refuses_root(self, phone) -> None:
        """adbd of a user build answers `adb root` with the production-build refusal."""
        assert root_reply(phone, "root:") == b"adbd cannot run as root in production builds\n"
        assert root_reply(phone, "unroot:") == b"adbd not running as root\n"


PROFILES = profiles(4)


class TestProperties:
    @pytest.mark.parametrize(
        "spec", [s for s in PROFILES if s.getprop_fixture], ids=lambda s: s.model
    )
    def test_profile_agrees_with_its_capture(self, spec: PhoneSpec) -> None:
        """Every property the spec defines has the captured value, except the ones a
        virtual phone must change (ABI, and the build type of a user build)."""
        captured = fixture_props(spec.getprop_fixture)
        changed = {"ro.product.cpu.abi", "ro.product.cpu.abilist", "ro.product.cpu.abilist32",
                   "ro.product.cpu.abilist64", "ro.build.description", "ro.build.display.id",
                   "ro.build.fingerprint", "ro.build.tags"}
        if captured["ro.build.type"] != spec.build_type:
            changed |= {"ro.build.type", "ro.debuggable"}
        differ = {k: (captured[k], v) for k, v in identity_props(spec).items()
                  if k in captured and k not in changed and captured[k] != v}
        assert differ == {}

    def test_a_capture_is_reported_whole_with_this_phones_serial(self) -> None:
        """The Motorola profile reports the 863 captured properties but the Vulkan HAL
        (no driver); its serial replaces the captured one everywhere it appeared."""
        spec = next(s for s in PROFILES if s.model == "motorola edge 20")
        props = build_props(spec, "ZY22TEST01")
        captured = fixture_props(spec.getprop_fixture)
        assert len(captured) == 863
        assert set(captured) - set(props) == {"ro.hardware.vulkan"}
        assert "ZY22REDACT" not in render_getprop(props)
        assert props["ro.serialno"] == props["ro.boot.serialno"] == "ZY22TEST01"
        same = {k for k, v in captured.items() if props.get(k) == v}
        assert len(same) >= len(captured) - 12  # serials, ABI and boot state only

    def test_pixel_is_a_user_build(self) -> None:
        """The Pixel 8 capture is userdebug; the profile reports a user build throughout."""
        props = build_props(PROFILES[0], "SERIAL")
        assert (props["ro.build.type"], props["ro.debuggable"]) == ("user", "0")
        assert props["ro.build.fingerprint"].endswith(":user/release-keys")
        assert "userdebug" not in props["ro.build.display.id"] + props["ro.build.description"]


class TestAbiAgreement:
    @pytest.mark.parametrize("spec", PROFILES, ids=lambda s: s.model)
    def test_abi_cpuinfo_and_uname_agree(self, spec: PhoneSpec, tmp_path) -> None:
        """ro.product.cpu.abi, /proc/cpuinfo's layout and core count, uname -m and -a
        and /proc/version name one machine."""
        phone = AndroidPhone(spec, tmp_path / "phone", net=None, clock=FakeClock().monotonic)
        abi = sh(phone, "getprop ro.product.cpu.abi")[1].strip()
        cpuinfo = parse_proc_cpuinfo(sh(phone, "cat /proc/cpuinfo")[1])
        uname_m = sh(phone, "uname -m")[1].strip()
        uname_a = sh(phone, "uname -a")[1].split()
        version = sh(phone, "cat /proc/version")[1].split()
        assert (abi, uname_m) in {("x86_64", "x86_64"), ("arm64-v8a", "aarch64")}
        assert len(cpuinfo.processors) == spec.cores == int(sh(phone, "nproc")[1])
        x86_block = "vendor_id" in cpuinfo.extra or "flags" in sh(phone, "cat /proc/cpuinfo")[1]
        assert x86_block == (uname_m == "x86_64")
        assert uname_a[2] == version[2] == sh(phone, "uname -r")[1].strip()
        assert uname_a[-2] == uname_m
