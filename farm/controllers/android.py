"""Android phones behind the device-controller seam: adb, the TVM RPC app, the NDK.

Every method is the existing Android code, gathered: discovery is ``adb devices
-l`` (:func:`farm.device.adb_devices.parse_devices_l`), facts
:func:`farm.provision.facts.read_facts`, health one batched ``adb shell``
(:func:`farm.controllers.android_health.read_health`), the server the RPC app launched
toward the tracker (:func:`farm.provision.launch.launch_app`, with adb tunnels
on usb-only networks), recovery the app ladder (relaunch, force-stop and
relaunch, reinstall, reboot) and the target an Android ABI's
(:func:`farm.jobs.targets.target_for` with the NDK linker,
:func:`farm.jobs.ndk.linker_for`).

It has every optional capability (:mod:`farm.controllers.capabilities`): app
deaths from ``logcat -b events`` (:mod:`farm.controllers.android_events`), the
tail of logcat, tunnels it drops while the app keeps serving, and phones
reported by adb's device tracker (:mod:`farm.controllers.adb_host`) rather
than by :meth:`~AndroidController.discover`.

What a phone needs in memory between calls (how its app is configured, its
tunnels, the crashes logcat showed) is kept in a :class:`PhoneRuntime` per
serial; the fleet manager shares its own (:meth:`~AndroidController.use_runtime`),
so it sees the same objects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from farm.controllers.android_target import NdkFcompile
from farm.controllers.base import (
    ANDROID,
    ControllerContext,
    Discovered,
    HealthReading,
    RecoveryStep,
    TargetSpec,
    ThermalReading,
)
from farm.controllers.phone import PhoneRuntime
from farm.errors import ConfigError, FarmError, PhoneFault
from farm.tvm.keys import phone_key

if TYPE_CHECKING:
    from farm.adb import Adb
    from farm.aio import LoopThread
    from farm.controllers.android_events import AdbAppEvents
    from farm.controllers.options import FleetOptions

__all__ = ["KIND", "AndroidController", "NdkFcompile"]

log = structlog.get_logger(__name__)

KIND = ANDROID
#: ``pm uninstall`` of the RPC app before a reinstall (a few seconds on a real phone).
UNINSTALL_TIMEOUT_S = 60.0
#: ``adb reboot`` returns once adbd took the request, not when the phone is back.
REBOOT_TIMEOUT_S = 30.0
#: ``svc power stayon`` at provisioning.
STAYON_TIMEOUT_S = 15.0
#: ``adb devices -l``: answered by the local adb server.
DEVICES_TIMEOUT_S = 10.0
#: ``pidof`` and ``cat /proc/PID/status`` of the app, while a model job's session is open.
APP_MEMORY_TIMEOUT_S = 15.0
#: ``logcat -d`` of the device page: the page polls, a stuck phone must not hold it.
LOG_TIMEOUT_S = 5.0


class AndroidController:
    """Phones over adb running the TVM RPC app; see the module docstring.

    Args:
        options: the fleet's options (tracker, key prefix, network, APK, clash policy).
        adb: the adb client; None when only :meth:`compile_target` is used.
        loop: the event loop thread the usb-only tunnels run on; None on lan networks.
        runtime: serial -> its in-memory state; a private table by default.
        make_adb: makes the adb client on first use when ``adb`` is None.
    """

    kind = KIND
    #: adb's device tracker reports phones (:class:`~farm.controllers.capabilities.TrackedKind`).
    tracked = True
    #: The log :meth:`log_tail` reads (:class:`~farm.controllers.capabilities.LogReader`).
    log_source = "logcat"

    def __init__(
        self,
        options: FleetOptions,
        adb: Adb | None = None,
        loop: LoopThread | None = None,
        *,
        runtime: Callable[[str], PhoneRuntime] | None = None,
        make_adb: Callable[[], Adb] | None = None,
    ) -> None:
        self.options = options
        self._adb = adb
        self._make_adb = make_adb
        self._loop = loop
        self._lock = threading.Lock()
        self._phones: dict[str, PhoneRuntime] = {}
        self.runtime = runtime or self._own_runtime

    @classmethod
    def from_context(cls, context: ControllerContext) -> AndroidController:
        """Build from farm's settings; ``services`` may hold ``adb`` and ``loop``.

        Without an ``adb`` service it makes its own client of the configured adb
        server on first use (the attempt child's thermal gate does; a compile
        target needs none).

        Raises:
            ConfigError: no settings were given.
        """
        from farm.controllers.options import FleetOptions

        settings = context.require_settings(cls.kind)
        adb_settings = settings.adb

        def make_adb() -> Adb:
            from farm.adb import Adb, AdbServer

            return Adb(AdbServer(port=adb_settings.port, binary=adb_settings.binary))

        return cls(FleetOptions.from_settings(settings), context.services.get("adb"),
                   context.services.get("loop"), make_adb=make_adb)

    def use_runtime(self, runtime: Callable[[str], PhoneRuntime]) -> None:
        """Keep each phone's in-memory state in ``runtime(serial)`` from now on (the fleet's table).

        Called once, by the fleet manager that takes this controller, before any phone is seen.
        """
        self.runtime = runtime

    def _own_runtime(self, serial: str) -> PhoneRuntime:
        with self._lock:
            phone = self._phones.get(serial)
            if phone is None:
                phone = PhoneRuntime(serial, self.tracker_key(serial))
                self._phones[serial] = phone
            return phone

    @property
    def adb(self) -> Adb:
        """The adb client.

        Raises:
            ConfigError: the controller was built without one.
        """
        with self._lock:
            if self._adb is None and self._make_adb is not None:
                self._adb = self._make_adb()
        if self._adb is None:
            raise ConfigError("adb", "this android controller has no adb client")
        return self._adb

    # -- the protocol ----------------------------------------------------------------

    def discover(self) -> list[Discovered]:
        """Every transport the adb server lists, with its state (``device``, ``offline``...)."""
        from farm.device.adb_devices import parse_devices_l

        entries = parse_devices_l(self.adb.devices_text(timeout_s=DEVICES_TIMEOUT_S))
        return [Discovered(e.serial, e.state) for e in entries]

    def facts(self, serial: str) -> dict[str, Any]:
        """The phone's facts record (:func:`farm.provision.facts.facts_record`).

        Raises:
            AdbError: a reading is missing or unreadable.
            PhoneFault: adb failed.
        """
        from farm.provision.facts import facts_record, read_facts

        return facts_record(read_facts(self.adb, serial))

    def prepare(self, serial: str) -> None:
        """One-time setup before the first :meth:`start_server`: the APK, the launch method.

        Installs the configured APK (or checks the app is there), asks the
        phone how its app can be configured (run-as, root, the UI: only the
        phone knows whether su works) and keeps the screen on while plugged in
        (AOSP ``svc power stayon``).

        Raises:
            ConfigError: no APK configured and the app is not installed.
            UserFault: the APK clashes with the installed app's signature.
            PhoneFault: adb failed.
        """
        from farm.provision.apk import ensure_installed, installed_version
        from farm.provision.app_target import detect_method
        from farm.provision.launch import PACKAGE

        o = self.options
        if o.apk is not None:
            ensure_installed(self.adb, serial, o.apk, o.clash)
        elif installed_version(self.adb, serial, PACKAGE) is None:
            raise ConfigError("apk.path", f"{PACKAGE} is not installed on {serial} and no "
                              "APK is configured: set apk.path to the signed TVM RPC APK")
        self.runtime(serial).method = detect_method(self.adb, serial)
        self.adb.shell(serial, ["svc", "power", "stayon", "true"], timeout_s=STAYON_TIMEOUT_S)

    def read_health(self, serial: str, at: datetime, *,
                    registered: bool | None = None) -> HealthReading:
        """One batched ``adb shell`` sweep; a new ``FATAL EXCEPTION`` in logcat is news once.

        Raises:
            PhoneFault: adb failed or timed out.
        """
        from farm.controllers.android_health import read_health

        phone = self.runtime(serial)
        seen_before = phone.crashes_seen
        sample, count = read_health(self.adb, serial, at, crashes_seen=seen_before,
                                    registered=registered)
        with self._lock:  # keep the crashes the app watch noted during the read
            noticed = (phone.crashes_seen or 0) - (seen_before or 0)
            phone.crashes_seen = None if count is None else count + noticed
        return sample

    def open_app_events(self, serial: str) -> AdbAppEvents:
        """Follow the phone's app deaths from now on (``logcat -b events``).

        Raises:
            PhoneFault: the phone's clock is unreadable, or adb failed to start the stream.
        """
        from farm.controllers.android_events import open_app_events

        return open_app_events(self.adb, serial)

    def log_tail(self, serial: str, lines: int) -> list[str]:
        """The last ``lines`` lines of ``logcat -d -t LINES`` (the whole ring buffer's).

        Raises:
            PhoneFault: adb failed or did not answer within ``LOG_TIMEOUT_S``.
        """
        result = self.adb.shell(serial, ["logcat", "-d", "-t", str(lines)],
                                timeout_s=LOG_TIMEOUT_S)
        return result.out.splitlines()[-lines:]

    def note_crash(self, serial: str) -> None:
        """A ``FATAL EXCEPTION`` of the app was handled already: not news for the next sweep."""
        phone = self.runtime(serial)
        with self._lock:
            if phone.crashes_seen is not None:
                phone.crashes_seen += 1

    def start_server(self, serial: str) -> None:
        """(Re)open the usb-only tunnels and launch the app toward the tracker.

        Raises:
            PhoneFault: adb, a tunnel or the launch failed.
            ConfigError: usb-only network but no event loop for the tunnels.
        """
        from farm.provision.app_target import app_target_for, detect_method
        from farm.provision.launch import launch_app
        from farm.provision.tunnels import open_usb_tunnel

        o = self.options
        phone = self.runtime(serial)
        if o.network == "usb-only":
            if self._loop is None:
                raise ConfigError("tracker.network", "usb-only tunnels need farmd's event loop")
            self.detach(serial)
            phone.tunnel = open_usb_tunnel(self.adb, self._loop, serial, o.tracker,
                                           o.device_tracker_port)
        target = app_target_for(o.network, o.tracker, phone.key, phone_host=o.phone_host,
                                device_tracker_port=o.device_tracker_port)
        if phone.method is None:  # relaunched before provisioning learnt it
            phone.method = detect_method(self.adb, serial)
        launch_app(self.adb, serial, target, phone.method)

    def serve(self, serial: str, key: str) -> None:
        """Launch the app toward the tracker under ``key``; later launches keep it.

        Raises:
            PhoneFault: adb, a tunnel or the launch failed.
        """
        self.runtime(serial).key = key
        self.start_server(serial)

    def stop_server(self, serial: str) -> None:
        """Force-stop the app and close its tunnels; failures are logged, never raised."""
        from farm.provision.launch import stop_app

        try:
            stop_app(self.adb, serial)
        except FarmError as exc:
            log.warning("app_stop_failed", serial=serial, reason=str(exc))
        self.detach(serial)

    def detach(self, serial: str) -> None:
        """Close the phone's usb-only tunnels, if open (the phone left adb, farmd stops).

        The app keeps serving on the phone (:class:`~farm.controllers.capabilities.Detachable`).
        """
        from farm.provision.tunnels import close_usb_tunnel

        phone = self.runtime(serial)
        tunnel, phone.tunnel = phone.tunnel, None
        if tunnel is not None and self._loop is not None:
            close_usb_tunnel(self.adb, self._loop, tunnel)

    def recovery_steps(self, serial: str) -> list[RecoveryStep]:
        """Relaunch the app, force-stop and relaunch, reinstall the APK, reboot."""
        return [
            RecoveryStep("restart_app", lambda: self.start_server(serial)),
            RecoveryStep("force_stop_relaunch", lambda: self._force_stop_relaunch(serial)),
            RecoveryStep("reinstall", lambda: self._reinstall(serial)),
            RecoveryStep("reboot", lambda: self.adb.reboot(serial, timeout_s=REBOOT_TIMEOUT_S),
                         comes_back_alone=True),
        ]

    def _force_stop_relaunch(self, serial: str) -> None:
        from farm.provision.launch import stop_app

        stop_app(self.adb, serial)
        self.start_server(serial)

    def _reinstall(self, serial: str) -> None:
        from farm.provision.apk import ensure_installed
        from farm.provision.launch import PACKAGE
        from farm.provision.policy import ClashPolicy

        if self.options.apk is None:
            raise PhoneFault(serial, "no APK configured to reinstall")
        self.adb.shell(serial, ["pm", "uninstall", "-k", PACKAGE], timeout_s=UNINSTALL_TIMEOUT_S)
        ensure_installed(self.adb, serial, self.options.apk, ClashPolicy.FAIL)
        self.start_server(serial)

    def compile_target(self, facts: Mapping[str, Any], device: str = "cpu") -> TargetSpec:
        """The Android target of the phone's ABI and its linker.

        The linker (NDK clang, or the host compiler for a phone running host
        code) is resolved when it first links (:class:`NdkFcompile`): the jobs
        resolve it themselves before compiling to fail fast
        (:func:`farm.jobs.ndk.linker_for`), and asking for a target must not
        need the NDK.

        Raises:
            SpecError: unknown ABI or device, or the phone lacks the GPU API.
            PhoneFault: the facts have no ABI.
        """
        from farm.controllers.android_target import android_target

        return android_target(facts, device)

    def gating_reading(self, serial: str, at: datetime) -> ThermalReading:
        """The full health sweep (one adb round trip); the gate reads its thermal fields.

        Raises:
            PhoneFault: adb failed or timed out.
        """
        from farm.controllers.android_health import read_health

        sample, _ = read_health(self.adb, serial, at)
        return replace(sample, fatal_exception_seen=False)

    def app_peak_memory_kb(self, serial: str) -> int | None:
        """``VmHWM`` of the app's ``:RPCProcess`` (``/proc/PID/status``), KiB; None if not running.

        The stock app serves a session on a thread of that process (apache/tvm
        ``apps/android_rpc``, ``RPCProcessor.java``), so its high-water mark is
        the peak resident memory since the app started, this session's included.
        The shell user may read it: Android mounts ``/proc`` with
        ``hidepid=2,gid=readproc`` and ``shell`` is in ``readproc``.

        Raises:
            PhoneFault: adb failed, or the status had no ``VmHWM``.
        """
        from farm.device.processes import parse_pidof, parse_vm_hwm_kb
        from farm.provision.launch import RPC_PROCESS

        found = self.adb.shell(serial, ["pidof", RPC_PROCESS], timeout_s=APP_MEMORY_TIMEOUT_S)
        try:
            pids = parse_pidof(found.out) if found.exit_code == 0 else []
            if not pids:
                return None
            status = self.adb.shell(serial, ["cat", f"/proc/{pids[0]}/status"],
                                    timeout_s=APP_MEMORY_TIMEOUT_S)
            if status.exit_code != 0:  # it ended between the two calls
                return None
            return parse_vm_hwm_kb(status.out)
        except ValueError as exc:
            raise PhoneFault(serial, f"cannot read the app's memory: {exc}") from None

    def tracker_key(self, serial: str) -> str:
        """``<tracker.key>-<serial>`` with unsafe characters as ``-`` (:func:`phone_key`)."""
        return phone_key(self.options.key_prefix, serial)
