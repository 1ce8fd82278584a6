"""The throttle knob: the throttler process, the phone's speed and the fault that sets it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from farm.clock import FakeClock, wait_until
from farm.netaddr import free_port
from farm.procs import signal_group
from farm.virtual.android import AndroidPhone
from farm.virtual.cli import apply_fault
from farm.virtual.fleet import Fleet
from farm.virtual.net import Net
from farm.virtual.rpc_process import RpcProcess
from farm.virtual.throttle import QUIET_RT_PRIORITY, Throttle, favour, realtime
from farm.virtual.throttle_main import _Account

#: A busy loop in its own process group (what a kernel looks like to the scheduler).
SPIN = "while True:\n    pass\n"


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[bytes]]:
    """A busy process leading its own group, given priority where the host allows."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
    if not realtime(proc.pid, QUIET_RT_PRIORITY):
        favour(proc.pid, -10)
    try:
        yield proc
    finally:
        signal_group(proc.pid)
        proc.wait(timeout=30)


def cpu_share(pid: int, window_s: float = 1.5) -> float:
    """CPU seconds ``pid`` used per wall second over ``window_s``."""
    process = psutil.Process(pid)
    before, t0 = sum(process.cpu_times()[:2]), time.monotonic()
    time.sleep(window_s)  # a measuring window, not a wait for a condition
    return (sum(process.cpu_times()[:2]) - before) / (time.monotonic() - t0)


def throttlers() -> list[psutil.Process]:
    """Throttler processes started by this test process."""
    return [p for p in psutil.Process().children()
            if "farm.virtual.throttle_main" in " ".join(p.cmdline())]


class TestThrottle:
    def test_half_speed_halves_the_cpu_share_and_full_speed_restores_it(
        self, spinner: subprocess.Popen[bytes]
    ) -> None:
        """At 0.5 the group gets about half the CPU it got; back at 1.0 all of it again."""

        async def body() -> tuple[float, float, float]:
            throttle = Throttle(spinner.pid)
            try:
                full = cpu_share(spinner.pid)
                await throttle.set_speed(0.5)
                half = cpu_share(spinner.pid)
                await throttle.set_speed(1.0)
                again = cpu_share(spinner.pid)
            finally:
                await throttle.clear()
            return full, half, again

        full, half, again = asyncio.run(body())
        assert 0.35 < half / full < 0.65, (full, half)
        assert again / full > 0.8, (full, again)

    def test_clear_ends_the_throttler_and_leaves_the_group_running(
        self, spinner: subprocess.Popen[bytes]
    ) -> None:
        """After clear() no throttler is left and the group is not stopped."""

        async def body() -> None:
            throttle = Throttle(spinner.pid)
            await throttle.set_speed(0.2)
            assert len(throttlers()) == 1
            await throttle.clear()
            assert throttle.speed == 1.0

        asyncio.run(body())
        assert throttlers() == []
        assert psutil.Process(spinner.pid).status() != psutil.STATUS_STOPPED

    def test_throttler_ends_by_itself_when_the_group_is_gone(
        self, spinner: subprocess.Popen[bytes]
    ) -> None:
        """Killing the throttled group ends its throttler too."""

        async def body() -> None:
            throttle = Throttle(spinner.pid)
            await throttle.set_speed(0.5)
            [proc] = throttlers()
            signal_group(spinner.pid)
            spinner.wait(timeout=30)  # reaped: a zombie still counts as a group member
            await asyncio.get_running_loop().run_in_executor(None, proc.wait, 30)
            await throttle.clear()

        asyncio.run(body())
        assert throttlers() == []

    def test_sigterm_continues_the_group(self, spinner: subprocess.Popen[bytes]) -> None:
        """A throttler told to stop (as when its parent dies) leaves the group running."""
        argv = [sys.executable, "-m", "farm.virtual.throttle_main", "--pgid", str(spinner.pid),
                "--period-ms", "50", "--parent-pid", str(os.getpid())]
        throttler = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert throttler.stdin is not None and throttler.stdout is not None
        throttler.stdin.write(b"0.05\n")
        throttler.stdin.flush()
        assert throttler.stdout.readline() == b"speed 0.05\n"
        status = psutil.Process(spinner.pid)
        assert wait_until(lambda: status.status() == psutil.STATUS_STOPPED, 10)
        throttler.send_signal(signal.SIGTERM)
        assert throttler.wait(timeout=30) == 0
        assert status.status() != psutil.STATUS_STOPPED
        throttler.stdin.close()
        throttler.stdout.close()

    @pytest.mark.parametrize("factor", [0.0, -1.0, 1.5])
    def test_speed_outside_0_1_is_refused(self, factor: float) -> None:
        """A speed must be in (0, 1]."""
        with pytest.raises(ValueError, match=r"\(0, 1\]"):
            asyncio.run(Throttle(os.getpid()).set_speed(factor))


class TestStopAccount:
    """The throttler's stop lengths (pure: times are passed in)."""

    @staticmethod
    def account(speed: float) -> _Account:
        account = _Account(speed, period_s=1e-3)
        account.start = 0.0
        return account

    def test_a_stop_that_ran_long_is_taken_back_from_the_next(self) -> None:
        """0.9 at 1 ms: 0.1 ms owed a period; 0.05 ms too long is 0.05 ms less next time."""
        account = self.account(0.9)
        assert account.owed_s(0.9e-3) == pytest.approx(0.1e-3)
        account.served(0.15e-3, resumed=1.05e-3)
        assert account.next_stop == pytest.approx(1.95e-3)
        assert account.owed_s(1.95e-3) == pytest.approx(0.05e-3)

    def test_a_stop_cut_short_is_made_up(self) -> None:
        """A stop that served 0.02 of 0.1 ms owes the 0.08 ms besides the next 0.1 ms."""
        account = self.account(0.9)
        account.served(0.02e-3, resumed=0.92e-3)
        assert account.owed_s(1.82e-3) == pytest.approx(0.18e-3)

    def test_a_long_debt_is_forgiven_not_repaid_at_once(self) -> None:
        """A throttler held off for a second owes one period's stop, not 100 ms."""
        account = self.account(0.9)
        assert account.owed_s(1.0) == pytest.approx(0.1e-3)
        assert account.start == 1.0


class TestPhoneSpeed:
    def test_speed_is_the_throttle_fault_times_the_thermal_cap(
        self, phone: AndroidPhone, clock: FakeClock
    ) -> None:
        """A cool phone runs at the fault's factor; a hot one is slowed further, as its governor
        caps the clocks."""
        phone.throttle(0.9)
        assert phone.speed() == pytest.approx(0.9)
        thresholds = phone.spec.throttling_thresholds_c
        phone.heat(thresholds[2] + 0.5)  # thermal status 3 (SEVERE)
        assert phone.physics.thermal_status() == 3
        assert phone.speed() == pytest.approx(0.9 * phone.spec.thermal_speed[3])
        assert phone.spec.thermal_speed[3] < 1.0
        phone.throttle(1.0)
        assert phone.speed() == pytest.approx(phone.spec.thermal_speed[3])

    def test_light_throttling_keeps_full_speed(self, phone: AndroidPhone) -> None:
        """THERMAL_STATUS_LIGHT does not slow the phone ("UX not impacted")."""
        phone.heat(phone.spec.throttling_thresholds_c[0] + 0.5)
        assert phone.physics.thermal_status() == 1
        assert phone.speed() == 1.0

    def test_bad_factor_is_refused(self, phone: AndroidPhone) -> None:
        """The fault takes a speed in (0, 1] only."""
        with pytest.raises(ValueError):
            phone.throttle(0.0)
        assert phone.throttle_factor == 1.0


class TestThrottleFault:
    @pytest.fixture
    def fleet(self, tmp_path: Path) -> Iterator[Fleet]:
        with Fleet(1, adb_port=free_port(), data_dir=tmp_path, attach=False) as fleet:
            yield fleet

    def test_fault_sets_the_phones_factor(self, fleet: Fleet) -> None:
        """farm-phones fault SERIAL throttle --factor F reaches the phone."""
        serial = fleet.serials[0]
        apply_fault(fleet, {"serial": serial, "fault": "throttle", "factor": 0.5})
        assert fleet.phone(serial).android.throttle_factor == 0.5
        apply_fault(fleet, {"serial": serial, "fault": "throttle", "factor": 1})
        assert fleet.phone(serial).android.throttle_factor == 1.0

    def test_fault_without_factor_is_refused(self, fleet: Fleet) -> None:
        """throttle needs --factor."""
        with pytest.raises(ValueError, match="--factor"):
            apply_fault(fleet, {"serial": fleet.serials[0], "fault": "throttle"})


    def test_unknown_serial_is_one_line_naming_it(self, fleet: Fleet, tmp_path: Path) -> None:
        """An unknown or empty serial: the phones are named, never "KeyError: ''"."""
        from click.testing import CliRunner

        from farm.virtual.cli import main, start_control

        stop = start_control(fleet, tmp_path / "control")
        try:
            runner = CliRunner()
            unknown = runner.invoke(main, ["fault", "NOPE", "crash-app",
                                           "--data-dir", str(tmp_path / "control")])
            empty = runner.invoke(main, ["fault", "", "crash-app",
                                         "--data-dir", str(tmp_path / "control")])
        finally:
            stop()
        assert unknown.exit_code == 1
        assert unknown.output == (f"Error: no phone 'NOPE' in this fleet; its phones: "
                                  f"{fleet.serials[0]}\n")
        assert empty.exit_code == 2
        assert "Invalid value for 'SERIAL': is empty" in empty.output
        assert "KeyError" not in empty.output + unknown.output


class TestAppFollowsTheSpeed:
    def test_heat_and_the_fault_throttle_the_running_rpc_process(
        self, phone: AndroidPhone, tmp_path: Path
    ) -> None:
        """The RPC process runs at the phone's speed: heat or the throttle fault changes it."""

        async def refuse(host_spec: str) -> None:
            raise ConnectionRefusedError(host_spec)

        async def settled() -> None:
            while phone.app._tasks:  # the speed changes run as the app's tasks
                await asyncio.sleep(0.01)

        async def body() -> list[float]:
            net = Net("lan", refuse)  # type: ignore[arg-type]
            rpc = await RpcProcess.start(net=net, tracker_host="10.0.2.2", tracker_port=1,
                                         key="android", log_path=tmp_path / "rpc.log")
            speeds = []
            try:
                phone.app.rpc = rpc
                phone.heat(phone.spec.throttling_thresholds_c[2] + 0.5)  # status 3
                await settled()
                speeds.append(rpc.speed)
                phone.throttle(0.5)
                await settled()
                speeds.append(rpc.speed)
            finally:
                phone.app.rpc = None
                await rpc.stop()
                await net.close()
            return speeds

        speeds = asyncio.run(asyncio.wait_for(body(), timeout=120))
        hot = phone.spec.thermal_speed[3]
        assert speeds == [pytest.approx(hot), pytest.approx(0.5 * hot)]
        assert throttlers() == []


class TestThrottleCommand:
    @pytest.mark.parametrize("factor", ["0", "1.5", "fast"])
    def test_factor_outside_0_1_is_a_usage_error(self, factor: str, tmp_path: Path) -> None:
        """farm-phones fault SERIAL throttle --factor F wants 0 < F <= 1; else exit 2, one line."""
        from click.testing import CliRunner

        from farm.virtual.cli import main

        result = CliRunner().invoke(main, ["fault", "127.0.0.1:5555", "throttle", "--factor",
                                           factor, "--data-dir", str(tmp_path)])
        assert result.exit_code == 2
        assert "--factor" in result.output and "Traceback" not in result.output
