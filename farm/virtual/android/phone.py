"""``AndroidPhone``: the Android userland of one virtual phone.

It implements :class:`farm.virtual.contracts.Userland` for the transport: it
runs shell command lines, maps device paths to host files, and holds the
phone's state (properties, packages, settings, processes, logs, heat and
battery, the TVM RPC app). The shell commands live in the ``cmd_*`` modules;
importing :mod:`farm.virtual.android.commands` registers all of them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from farm.virtual.android import commands as _commands  # noqa: F401  (registers commands)
from farm.virtual.android.logbuf import LogBuffer
from farm.virtual.android.physics import Physics
from farm.virtual.android.processes import ProcessTable, render_status
from farm.virtual.android.props import build_props
from farm.virtual.android.shell import Shell
from farm.virtual.android.spec import PhoneSpec
from farm.virtual.android.storage import ROOT_ENTRIES, Storage, normalize
from farm.virtual.android.sysfiles import virtual_dirs, virtual_files
from farm.virtual.contracts import PhoneNet, ShellIO
from farm.virtual.throttle import check_speed

#: ``/proc/PID/status``, rendered per process of the table (:func:`render_status`).
_PROC_STATUS = re.compile(r"/proc/(\d+)/status")


class AndroidPhone:
    """The Android side of a virtual phone.

    Args:
        spec: the phone model and its behaviour constants.
        data_dir: host folder holding the phone's storage and state.
        net: the phone's network, used by the RPC app's process.
        clock: monotonic seconds for heat, battery and uptime (injectable).
        wall_clock: epoch seconds for log timestamps (injectable).
    """

    def __init__(
        self,
        spec: PhoneSpec,
        data_dir: Path,
        net: PhoneNet,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        from farm.virtual.android.packages import PackageManager
        from farm.virtual.android.tvmrpc_app import TvmRpcApp
        from farm.virtual.android.ui import Screen

        self.spec = spec
        self.net = net
        self.clock = clock
        self.storage = Storage(Path(data_dir))
        seed = f"{spec.model}:{spec.serial_port}:{data_dir}".encode()
        self.serialno = hashlib.sha256(seed).hexdigest()[:14].upper()
        self.props = build_props(spec, self.serialno)
        self.physics = Physics(spec, clock)
        self.processes = ProcessTable()
        self.logs = LogBuffer(wall_clock)
        self.settings: dict[str, dict[str, str]] = {"global": {}, "system": {}, "secure": {}}
        self.stay_on_while_plugged = 0
        self.awake = True
        self.filler_bytes = 0
        self.shell_hung = False
        self.throttle_factor = 1.0
        self.on_reboot: Callable[[str], None] | None = None
        self._boot_t = clock()
        self._vfiles = virtual_files(self)
        self._vdirs = virtual_dirs(self._vfiles)
        self._load_state()
        self.packages = PackageManager(self)
        self.screen = Screen(self)
        self.app = TvmRpcApp(self)

    # --- Userland ------------------------------------------------------------

    def banner_props(self) -> Mapping[str, str]:
        """``ro.product.name``, ``ro.product.model``, ``ro.product.device`` for CNXN."""
        keys = ("ro.product.name", "ro.product.model", "ro.product.device")
        return {k: self.props[k] for k in keys}

    def get_property(self, key: str) -> str:
        """A system property's value, ``""`` if unset."""
        return self.props.get(key, "")

    async def shell(self, command: str, io: ShellIO) -> int:
        """Run one ``sh -c`` command line (or an interactive shell for ``""``).

        Returns:
            The exit status, 0..255. Under :meth:`hang_shell` it never returns;
            the transport cancels it when the stream closes.
        """
        if self.shell_hung:
            await asyncio.Event().wait()
        sh = Shell.for_io(self, io)
        if command == "":
            status = await sh.run_interactive()
        else:
            status = await sh.run_script(command)
        await io.drain()
        return status & 0xFF

    def host_path(self, device_path: str, *, write: bool) -> Path:
        """Map a device path to the host file backing it (sync service).

        Raises:
            PermissionError: the shell user may not read (or write) there.
            FileNotFoundError: the path is outside the emulated storage.
        """
        path = normalize(device_path)
        if not write and path in self._vfiles:
            snapshot = self.storage.generated_dir / path.lstrip("/")
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            snapshot.write_text(self._vfiles[path]())
            return snapshot
        return self.storage.check(path, write=write)

    def storage_free_bytes(self) -> int:
        """Free bytes on /data."""
        return self.storage.free_bytes(
            self.spec.storage_total_kb, self.spec.storage_used_kb, self.filler_bytes
        )

    async def on_boot(self) -> None:
        """Start boot-time state: fresh processes, screen on, logs of a boot."""
        self._boot_t = self.clock()
        self.processes.boot()
        self.awake = True
        self.logs.log(832, "I", "ActivityManager", "System now ready", buffer="system")

    async def on_shutdown(self) -> None:
        """End every process the phone started (the RPC process) before reboot."""
        await self.app.shutdown()
        self._save_state()

    # --- faults ----------------------------------------------------------------

    async def crash_app(self) -> None:
        """Fault: the TVM RPC app crashes (FATAL EXCEPTION in logcat, no restart)."""
        await self.app.crash()

    def heat(self, to_c: float) -> None:
        """Fault: the phone heats up to ``to_c`` (hottest sensor, °C); hot, it runs slower."""
        self.physics.heat(to_c)
        self.app.speed_changed()

    def throttle(self, factor: float) -> None:
        """Fault: the phone runs at ``factor`` of its speed (1.0 removes the fault).

        Raises:
            ValueError: ``factor`` is not in (0, 1].
        """
        self.throttle_factor = check_speed(factor)
        self.app.speed_changed()

    def speed(self) -> float:
        """Fraction of its speed the phone runs at: the throttle fault times the thermal cap."""
        return self.throttle_factor * self.physics.speed_factor()

    def drain_battery(self, to_pct: float) -> None:
        """Fault: the battery drops to ``to_pct`` percent."""
        self.physics.drain(to_pct)

    def set_plugged(self, plugged: bool) -> None:
        """Connect or disconnect USB power."""
        self.physics.set_plugged(plugged)

    def fill_storage(self) -> None:
        """Fault: /data fills up (installs and pushes fail for lack of space)."""
        self.filler_bytes += self.storage_free_bytes()

    def hang_shell(self, on: bool) -> None:
        """Fault: new shell commands never return while ``on``."""
        self.shell_hung = on

    # --- helpers the commands use ----------------------------------------------------

    @property
    def shell_pid(self) -> int:
        """A pid for ``$$``."""
        return self.processes.last_pid + 1

    def uptime_s(self) -> float:
        """Seconds since the last boot."""
        return self.clock() - self._boot_t

    def mem_used_kb(self) -> int:
        """Used RAM in KiB (boot baseline plus running app processes)."""
        apps_kb = sum(p.rss_kb for p in self.processes.procs.values() if p.user.startswith("u0_"))
        return self.spec.mem_total_kb * 45 // 100 + apps_kb

    def request_reboot(self, mode: str = "") -> None:
        """Tell the transport, if it listens, that a reboot was asked for.

        Args:
            mode: ``reboot``'s argument (``""``, ``bootloader``, ``recovery``).
        """
        if self.on_reboot is not None:
            self.on_reboot(mode)

    def is_virtual(self, path: str) -> bool:
        """Whether a normalized path is a rendered /proc or /sys file."""
        return path in self._vfiles

    def read_file(self, path: str, *, app: str | None = None) -> bytes:
        """Contents of a device file (rendered or stored).

        Raises:
            PermissionError, FileNotFoundError, IsADirectoryError: as ``open`` would.
        """
        if path in self._vfiles:
            return self._vfiles[path]().encode()
        if path in self._vdirs:
            raise IsADirectoryError(path)
        if (status := _PROC_STATUS.fullmatch(path)) is not None:
            proc = self.processes.procs.get(int(status[1]))
            if proc is None:
                raise FileNotFoundError(path)
            return render_status(proc).encode()
        host = self.storage.check(path, write=False, app=app)
        if host.is_dir():
            raise IsADirectoryError(path)
        return host.read_bytes()

    def listdir(self, path: str, *, app: str | None = None) -> list[str] | None:
        """Names in a device directory, or None if it is not one (or unreadable)."""
        if path == "/":
            return list(ROOT_ENTRIES)
        if path in self._vdirs:
            return sorted(self._vdirs[path])
        try:
            host = self.storage.check(path, write=False, app=app)
        except OSError:
            return None
        if not host.is_dir():
            return None
        return sorted(p.name for p in host.iterdir())

    def exists(self, path: str, *, app: str | None = None) -> bool:
        """Whether a device path exists and is visible to the caller."""
        if path == "/" or path in self._vfiles or path in self._vdirs:
            return True
        if path.count("/") == 1 and path[1:] in ROOT_ENTRIES:
            return True
        try:
            return self.storage.check(path, write=False, app=app).exists()
        except OSError:
            return False

    def isdir(self, path: str, *, app: str | None = None) -> bool:
        """Whether a device path is a directory visible to the caller."""
        if path == "/" or path in self._vdirs:
            return True
        if path.count("/") == 1 and path[1:] in ROOT_ENTRIES:
            return True
        try:
            return self.storage.check(path, write=False, app=app).is_dir()
        except OSError:
            return False

    # --- persistence ----------------------------------------------------------------------

    def _state_file(self) -> Path:
        return self.storage.state_dir / "settings.json"

    def _load_state(self) -> None:
        path = self._state_file()
        if path.exists():
            data = json.loads(path.read_text())
            self.settings = data.get("settings", self.settings)
            self.props.update(data.get("props", {}))
        stay_on = self.settings["global"].get("stay_on_while_plugged_in", "0")
        self.stay_on_while_plugged = int(stay_on or 0)

    def _save_state(self) -> None:
        persist = {k: v for k, v in self.props.items() if k.startswith("persist.")}
        self._state_file().write_text(json.dumps({"settings": self.settings, "props": persist}))

    def save(self) -> None:
        """Write settings and persistent properties to disk (survive reboot)."""
        self._save_state()
