"""ActivityManager's event-log lines when the TVM RPC app dies, and logcat -T / date."""

from __future__ import annotations

import asyncio
import re

import pytest

from farm.virtual.android.logbuf import parse_time

from .conftest import CollectIO, install_fake_tvmrpc, run

pytestmark = pytest.mark.timeout(60)

PKG = "org.apache.tvm.tvmrpc"
# threadtime: MM-DD HH:MM:SS.mmm, pid and tid right-aligned to 5, level, tag, message.
EVENT = re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +832 +\d+ I (am_\w+) *: \[(.*)\]$")


def events(log: str) -> list[tuple[str, list[str]]]:
    """(tag, fields) of each ActivityManager event line in ``log``."""
    found = []
    for line in log.splitlines():
        match = EVENT.match(line)
        if match:
            found.append((match[1], match[2].split(",")))
    return found


class TestAppDeathEvents:
    def test_crash_logs_am_crash_then_am_proc_died(self, phone) -> None:
        """A crash logs am_crash for the app's process, then am_proc_died for it."""
        install_fake_tvmrpc(phone)

        async def scenario() -> tuple[str, int]:
            await run(phone, f"am start -n {PKG}/.MainActivity")
            pid = phone.app.main_pid
            await phone.crash_app()
            return (await run(phone, "logcat -d -b events -s am_crash am_proc_died"))[1], pid

        log, pid = asyncio.run(scenario())
        assert log.startswith("--------- beginning of events\n")
        found = events(log)
        assert [tag for tag, _ in found] == ["am_crash", "am_proc_died"]
        crash, died = found[0][1], found[1][1]
        assert crash[:3] == ["0", str(pid), PKG]
        assert crash[4:6] == ["java.lang.IllegalStateException", "injected crash"]
        assert len(crash) == 9  # sdk >= 31: the Recoverable field
        assert died == ["0", str(pid), PKG, "0", "2"]

    def test_force_stop_logs_am_kill_not_am_proc_died(self, phone) -> None:
        """am force-stop is the activity manager's own kill: am_kill, and no am_proc_died."""
        install_fake_tvmrpc(phone)

        async def scenario() -> str:
            await run(phone, f"am start -n {PKG}/.MainActivity")
            await run(phone, f"am force-stop {PKG}")
            return (await run(phone, "logcat -d -b events"))[1]

        found = events(asyncio.run(scenario()))
        assert [tag for tag, _ in found] == ["am_kill"]
        assert found[0][1][2] == PKG
        assert found[0][1][4].startswith(f"stop {PKG} due to from pid ")

    def test_follower_gets_am_proc_died_of_a_kill(self, phone) -> None:
        """`logcat -b events` without -d stays open and streams the death of a killed app."""
        install_fake_tvmrpc(phone)

        async def scenario() -> tuple[str, int]:
            await run(phone, f"am start -n {PKG}/.MainActivity")
            pid = phone.app.main_pid
            io = CollectIO()
            follower = asyncio.create_task(
                phone.shell("logcat -b events -s am_proc_died am_crash", io))
            await asyncio.sleep(0.05)
            assert not follower.done()
            await run(phone, f"run-as {PKG} kill {pid}")
            deadline = asyncio.get_running_loop().time() + 5
            while b"am_proc_died" not in io.stdout:
                assert asyncio.get_running_loop().time() < deadline, io.stdout
                await asyncio.sleep(0.01)
            assert not follower.done()  # still following
            follower.cancel()
            return io.stdout.decode(), pid

        log, pid = asyncio.run(scenario())
        assert events(log) == [("am_proc_died", ["0", str(pid), PKG, "0", "2"])]


class TestLogcatSince:
    def test_since_time_skips_older_lines(self, phone) -> None:
        """`logcat -T <epoch.ms>` prints only what was logged at or after that time."""
        now = phone.logs.now_s()
        phone.logs.entries.clear()
        phone.logs.log(1, "I", "Old", "before")
        phone.logs.entries[-1] = phone.logs.entries[-1].__class__(
            now - 10, 1, 1, "I", "Old", "before")
        phone.logs.log(1, "I", "New", "after")
        _, out, _ = asyncio.run(run(phone, f"logcat -d -T {now - 1:.3f}"))
        assert "after" in out
        assert "before" not in out

    def test_bad_time_is_an_error(self, phone) -> None:
        """A -T value that is neither a count nor a time fails as logcat does."""
        status, _, err = asyncio.run(run(phone, "logcat -d -T yesterday"))
        assert status == 1
        assert err == "logcat: -T 'yesterday' not in time format\n"

    def test_parse_time_forms(self) -> None:
        """Epoch, YYYY-MM-DD and MM-DD (this year, UTC) forms all parse."""
        assert parse_time("1700000000.250", 0) == 1700000000.25
        assert parse_time("2023-11-14 22:13:20.000", 0) == 1700000000.0
        assert parse_time("11-14 22:13:20.500", 1700000000.0) == 1700000000.5
        assert parse_time("now", 0) is None

    def test_date_prints_epoch_seconds(self, phone) -> None:
        """`date +%s` prints the phone's clock in whole epoch seconds."""
        _, out, _ = asyncio.run(run(phone, "date +%s"))
        assert abs(int(out) - phone.logs.now_s()) <= 1
