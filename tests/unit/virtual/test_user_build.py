"""A user build's shell as the shell user: kill, exec, logcat that follows."""

from __future__ import annotations

import asyncio

import pytest

from farm.virtual.adbd.services import root_reply

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
        status, out, _ = sh(phone, 'export ANDROID_LOG_TAGS="" ; exec getprop ro.build.type; echo no')
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
