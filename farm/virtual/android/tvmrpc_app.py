"""The stock TVM RPC app ``org.apache.tvm.tvmrpc``, as apache/tvm apps/android_rpc behaves.

From ``MainActivity.java``: ``onResume`` loads the EditTexts and the switch from
SharedPreferences ``RPCProxyPreference`` (``enableInputView``) and posts a
runnable ``HANDLER_RESTART_DELAY`` = 5000 ms later (``setupRelaunch``) that, if
the switch is checked, saves the fields back (``updateRPCPrefs``, which parses
the port with ``Integer.parseInt``) and starts ``RPCActivity``. Toggling the
switch on saves the prefs and posts the same runnable. ``RPCActivity`` runs in
process ``:RPCProcess`` (AndroidManifest.xml) and is not exported; when its
server ends (the watchdog finishes the activity, ``onDestroy`` kills the
process) MainActivity resumes and the cycle repeats: that is the app's
watchdog. A crash kills the app; nothing restarts it until it is launched again.

SharedPreferences are cached in the app process (Android's
``SharedPreferencesImpl``): edits to the XML file take effect at the next
process start, so tools must force-stop the app before writing the file
(:mod:`farm.virtual.android.app_prefs`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import structlog

from farm.virtual.android import am_events
from farm.virtual.android.app_prefs import AppPrefs, Fields

if TYPE_CHECKING:
    from farm.virtual.android.phone import AndroidPhone
    from farm.virtual.rpc_process import RpcProcess

PACKAGE = "org.apache.tvm.tvmrpc"
MAIN = f"{PACKAGE}.MainActivity"
RPC = f"{PACKAGE}.RPCActivity"
PREFS = "RPCProxyPreference"
log = structlog.get_logger(__name__)

__all__ = ["MAIN", "PACKAGE", "PREFS", "RPC", "Fields", "TvmRpcApp"]

_AM_PID = am_events.AM_PID  # system_server: ActivityManager logs under its pid


class TvmRpcApp:
    """Activities, processes and preferences of the TVM RPC app on one phone."""

    def __init__(self, phone: AndroidPhone) -> None:
        self.phone = phone
        self.main_pid: int | None = None
        self.main_alive = False  # MainActivity exists (created, not destroyed)
        self.main_resumed = False
        self.rpc_activity = False
        self.rpc: RpcProcess | None = None
        self.fields = Fields()
        self.prefs = AppPrefs(
            lambda: phone.storage.app_dir(PACKAGE) / "shared_prefs" / f"{PREFS}.xml")
        self._timers: list[asyncio.TimerHandle] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.crashes = 0

    # --- lifecycle -------------------------------------------------------------------

    @property
    def installed(self) -> bool:
        """Whether the package is installed."""
        return PACKAGE in self.phone.packages.installed

    def _log(self, level: str, tag: str, message: str) -> None:
        self.phone.logs.log(self.main_pid or _AM_PID, level, tag, message)

    def _am_log(self, message: str) -> None:
        """An ActivityManager line in the system buffer, as system_server logs it."""
        self.phone.logs.log(_AM_PID, "I", "ActivityManager", message, buffer="system")

    def _crash_on_port(self, pid: int) -> None:
        """Crash the app as ``updateRPCPrefs`` does when the port field is not a number."""
        self._crash(pid, PACKAGE,
                    f'java.lang.NumberFormatException: For input string: "{self.fields.port}"',
                    ["java.lang.Integer.parseInt(Integer.java:747)",
                     f"{MAIN}.updateRPCPrefs(MainActivity.java:58)"])

    def _start_main_process(self) -> None:
        if self.main_pid is not None:
            return
        uid = self.phone.packages.uid_of(PACKAGE)
        proc = self.phone.processes.spawn(f"u0_a{uid - 10000}", PACKAGE)
        self.main_pid = proc.pid
        self.prefs.forget()
        self._am_log(f"Start proc {proc.pid}:{PACKAGE}/u0a{uid - 10000} "
                     f"for top-activity {{{PACKAGE}/{MAIN}}}")

    def launch_main(self) -> str:
        """``am start`` of MainActivity; returns the am warning line or ``""``."""
        if self.main_alive and (self.main_resumed or self.rpc_activity):
            return "Warning: Activity not started, its current task has been brought to the front\n"
        self._start_main_process()
        self.main_alive = True
        self.phone.screen.foreground = "main"
        self._resume_main()
        return ""

    def _resume_main(self) -> None:
        """``onResume``: enableInputView(true), then setupRelaunch()."""
        self.main_resumed = True
        self.phone.screen.foreground = "main"
        self._log("W", "System.err", "MainActivity onResume...")
        self.prefs.load_into(self.fields)
        self._setup_relaunch()

    def _setup_relaunch(self) -> None:
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(self.phone.spec.rpc_start_delay_s, self._relaunch))

    def _relaunch(self) -> None:
        main_pid = self.main_pid
        if main_pid is None or not self.main_alive or not self.fields.switch or self.rpc_activity:
            return
        self._log("W", "System.err", "relaunching RPC activity...")
        try:
            self.prefs.commit(self.fields)
        except ValueError:
            self._crash_on_port(main_pid)
            return
        self.rpc_activity = True
        self.main_resumed = False
        self.phone.screen.foreground = "rpc"
        self._spawn(self._run_rpc(self.fields.address, int(self.fields.port), self.fields.key))

    def set_switch(self, checked: bool) -> None:
        """The switch's ``onCheckedChanged``: save prefs; when on, post the relaunch."""
        self.fields.switch = checked
        state = "enabled" if checked else "disabled"
        self._log("W", "System.err", f"automatic RPC restart {state}...")
        try:
            self.prefs.commit(self.fields)
        except ValueError as exc:
            if self.main_pid is None:  # the switch is on screen only while MainActivity runs
                raise RuntimeError("switch toggled without MainActivity's process") from exc
            self._crash_on_port(self.main_pid)
            return
        if checked:
            self._setup_relaunch()

    async def _run_rpc(self, host: str, port: int, key: str) -> None:
        from farm.virtual.rpc_process import RpcProcess

        self._log("W", "System.err", "rpc activity onCreate...")
        app_dir = self.phone.storage.app_dir(PACKAGE)
        try:
            rpc = await RpcProcess.start(
                net=self.phone.net,
                tracker_host=host,
                tracker_port=port,
                key=key,
                log_path=self.phone.storage.state_dir / "rpc_process.log",
                work_dir=app_dir / "cache",
            )
        except Exception as exc:  # noqa: BLE001 - any throwable in the app is a crash of :RPCProcess
            self.rpc_activity = False
            pid = self.phone.processes.next_pid()
            self._crash(pid, f"{PACKAGE}:RPCProcess", f"java.lang.RuntimeException: {exc}",
                        [("org.apache.tvm.rpc.ConnectTrackerServerProcessor.<init>"
                          "(ConnectTrackerServerProcessor.java:96)"),
                         "org.apache.tvm.tvmrpc.RPCProcessor.run(RPCProcessor.java:58)"],
                        whole_app=False)
            if self.main_alive and self.main_pid is not None:
                self._resume_main()
            return
        if not self.rpc_activity:  # force-stopped while starting
            await rpc.stop()
            return
        self.rpc = rpc
        uid = self.phone.packages.uid_of(PACKAGE)
        self.phone.processes.spawn(f"u0_a{uid - 10000}", f"{PACKAGE}:RPCProcess", pid=rpc.pid)
        self._am_log(f"Start proc {rpc.pid}:{PACKAGE}:RPCProcess/u0a{uid - 10000} "
                     f"for activity {{{PACKAGE}/{RPC}}}")
        await self._apply_speed(rpc)
        self._spawn(self._sample_load(rpc))
        await rpc.wait()
        self.phone.processes.kill(rpc.pid)
        self.phone.physics.set_load(0.0)
        if self.rpc is rpc:
            self.rpc = None
        if self.rpc_activity:
            self._am_log(f"Process {PACKAGE}:RPCProcess (pid {rpc.pid}) has died: fg  TOP ")
            am_events.proc_died(self.phone.logs, rpc.pid, f"{PACKAGE}:RPCProcess", am_events.TOP)
            self.rpc_activity = False
            if self.main_alive and self.main_pid is not None:
                self._resume_main()

    def speed_changed(self) -> None:
        """The phone's speed may have changed (a fault, its heat): apply it to the RPC process."""
        if self.rpc is not None:
            self._spawn(self._apply_speed(self.rpc))

    async def _apply_speed(self, rpc: RpcProcess) -> None:
        """Run ``rpc`` at the phone's speed; a throttler failing to start is logged, not fatal."""
        try:
            await rpc.set_speed(self.phone.speed())
        except OSError as exc:
            log.warning("throttle_failed", pid=rpc.pid, reason=str(exc))

    async def _sample_load(self, rpc: RpcProcess) -> None:
        """Feed the RPC process's CPU use (psutil, process and children) into the heat model.

        Once a second, so the heat a session makes also slows it down, as a
        phone's governor does (:meth:`AndroidPhone.speed`).
        """
        import psutil

        try:
            proc = psutil.Process(rpc.pid)
            proc.cpu_percent(None)
            while rpc.alive():
                await asyncio.sleep(1.0)
                total = proc.cpu_percent(None)
                for child in proc.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        total += child.cpu_percent(None)
                self.phone.physics.set_load(total / 100.0 / self.phone.spec.cores)
                await self._apply_speed(rpc)
        except psutil.Error:
            return

    def _spawn(self, coro) -> None:  # noqa: ANN001 - a coroutine
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- ending -------------------------------------------------------------------------

    def _cancel_timers(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    async def _kill_all(self, *, died: bool = False, killed_for: str | None = None) -> None:
        """End both processes and all pending work.

        Args:
            died: the processes died by themselves (a crash, a ``kill``):
                ActivityManager logs ``am_proc_died`` for each.
            killed_for: ActivityManager killed them for this reason (``am
                force-stop``): it logs ``am_kill`` for each instead.
        """
        self._cancel_timers()
        rpc_on_top = self.rpc_activity
        self.rpc_activity = False
        self.main_alive = self.main_resumed = False
        ended: list[tuple[int, str, tuple[int, int]]] = []
        if self.rpc is not None:
            rpc, self.rpc = self.rpc, None
            await rpc.stop()
            self.phone.processes.kill(rpc.pid)
            ended.append((rpc.pid, f"{PACKAGE}:RPCProcess", am_events.TOP))
        if self.main_pid is not None:
            self.phone.processes.kill(self.main_pid)
            ended.append((self.main_pid, PACKAGE,
                          am_events.BACKGROUND if rpc_on_top else am_events.TOP))
            self.main_pid = None
        for pid, process, state in ended:
            if died:
                am_events.proc_died(self.phone.logs, pid, process, state)
            elif killed_for is not None:
                am_events.killed(self.phone.logs, pid, process, state, killed_for)
        self.prefs.forget()
        self.phone.physics.set_load(0.0)
        if self.phone.screen.foreground in ("main", "rpc"):
            self.phone.screen.foreground = "home"

    def _crash(self, pid: int, process: str, exception: str, frames: list[str], *,
               whole_app: bool = True) -> None:
        self.crashes += 1
        message = f"FATAL EXCEPTION: main\nProcess: {process}, PID: {pid}\n{exception}"
        message += "".join(f"\n\tat {f}" for f in frames)
        self.phone.logs.log(pid, "E", "AndroidRuntime", message, buffer="crash")
        am_events.crashed(self.phone.logs, pid, process, exception, sdk=self.phone.spec.sdk)
        self._am_log(f"Process {process} (pid {pid}) has died: fg  TOP ")
        if whole_app:
            self._spawn(self._kill_all(died=True))
        else:
            am_events.proc_died(self.phone.logs, pid, process, am_events.TOP)

    async def crash(self) -> None:
        """Fault: the app's main thread throws; both processes die, nothing restarts."""
        pid = self.main_pid or (self.rpc.pid if self.rpc else self.phone.processes.next_pid())
        self.crashes += 1
        self.phone.logs.log(
            pid, "E", "AndroidRuntime",
            f"FATAL EXCEPTION: main\nProcess: {PACKAGE}, PID: {pid}\n"
            "java.lang.IllegalStateException: injected crash\n"
            f"\tat {MAIN}.onResume(MainActivity.java:126)\n"
            "\tat android.app.Activity.performResume(Activity.java:8422)",
            buffer="crash",
        )
        am_events.crashed(self.phone.logs, pid, PACKAGE,
                          "java.lang.IllegalStateException: injected crash",
                          sdk=self.phone.spec.sdk, line=126)
        await self._kill_all(died=True)

    async def kill_process(self, pid: int) -> bool:
        """SIGKILL one of the app's processes (its own ``kill``, under ``run-as``).

        The RPC process dies alone (the app sees it die, as after a crash); the
        main process takes the RPC activity with it, as its host activity ends.

        Returns:
            Whether ``pid`` was one of the app's processes.
        """
        if self.rpc is not None and self.rpc.pid == pid:
            await self.rpc.stop()
            return True
        if self.main_pid is not None and self.main_pid == pid:
            await self._kill_all(died=True)
            return True
        return False

    async def force_stop(self, package: str) -> None:
        """``am force-stop``: kill the app's processes and pending work."""
        await self._stopped(package, f"from pid {self.phone.shell_pid}")

    async def _stopped(self, package: str, why: str) -> None:
        """ActivityManager stops ``package`` (``am_kill`` reason ``stop <pkg> due to <why>``)."""
        if package == PACKAGE:
            await self._kill_all(killed_for=f"stop {package} due to {why}")

    async def package_removed(self, package: str) -> None:
        """The package was uninstalled."""
        await self._stopped(package, "pkg removed")

    async def package_replaced(self, package: str) -> None:
        """The package was (re)installed: Android kills the old app's processes."""
        await self._stopped(package, "replace pkg")

    def go_home(self) -> None:
        """HOME key: MainActivity pauses (its posted runnable still fires)."""
        self.main_resumed = False
        self.phone.screen.foreground = "home"

    async def back(self) -> None:
        """BACK key: RPCActivity finishes (process exits), or MainActivity is destroyed."""
        if self.rpc_activity and self.rpc is not None:
            await self.rpc.stop()
        elif self.main_resumed:
            self._cancel_timers()
            self.main_alive = self.main_resumed = False
            self.phone.screen.foreground = "home"

    async def shutdown(self) -> None:
        """Phone shutdown: end every process the app started."""
        await self._kill_all()
        for task in list(self._tasks):
            task.cancel()
