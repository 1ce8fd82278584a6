"""Linux boards over SSH behind the device-controller seam.

A board is one ``[[boards]]`` entry (:class:`~farm.config.BoardSettings`); its
serial is the entry's ``name``. farm logs in with the configured key over
SSH (:mod:`farm.ssh`, paramiko: see there why), and every remote command is an
argv list from :mod:`farm.boards.commands`:

* discovery: a board is ``device`` while its SSH connection opens, ``offline``
  otherwise (the fleet's lifecycle reads those words as it reads adb's);
* facts: ``uname -m``/``-r``, ``nproc``, ``/proc/cpuinfo``,
  ``/proc/device-tree/model``, ``/proc/meminfo`` in one round trip;
* the tracker: dialled directly, or through an SSH remote port forward on the
  board's loopback (:mod:`farm.ssh.forward`, like ``adb reverse``) when the
  board cannot reach it (``tracker_via``);
* the server: the board's ``python -m tvm.exec.rpc_server`` (checked first by
  importing it; a missing TVM is a :class:`~farm.errors.ToolMissing` naming the
  fix) or its C++ ``tvm_rpc``, started detached under the board's tracker key
  with a pidfile in its work folder and stopped by killing that process group;
* health: the thermal zones under the board's ``sysfs_root``, the server's
  process group, ``df -k`` of the work folder, ``/proc/loadavg`` and
  ``/proc/meminfo`` in one round trip, as the readings
  :data:`~farm.health.kind_readings.BOARD_READINGS` declares;
* recovery: restart the server (``restart_app``), then ``reboot`` only where
  ``reboot_allowed``; the ladder climbs past the Android-only rungs and
  quarantines after the last one (:mod:`farm.supervise.ladder`);
* targets: ``llvm`` for the board's ``uname -m`` with its cross compiler
  (:mod:`farm.jobs.board_targets`).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import structlog

from farm.boards import commands
from farm.config import BoardSettings, Settings
from farm.controllers.base import (
    BOARD,
    ControllerContext,
    Discovered,
    HealthReading,
    RecoveryStep,
    TargetSpec,
    ThermalReading,
)
from farm.controllers.board_health import reading_from_output
from farm.device.cpu import parse_proc_cpuinfo, parse_proc_meminfo
from farm.device.thermal import parse_thermal_zones
from farm.errors import FarmError, PhoneFault, SpecError, ToolMissing
from farm.health.kind_readings import BoardRaw
from farm.health.readings import declared
from farm.health.sample import ADB_STATE_DEVICE
from farm.jobs.board_targets import board_linker, board_target
from farm.netaddr import is_loopback
from farm.ssh import SshClient, SshError

__all__ = ["KIND", "BoardController", "board_tracker_key", "facts_from_output",
           "is_emulated", "reading_from_output", "uses_forward"]

log = structlog.get_logger(__name__)

KIND = BOARD
#: ``discover`` reports a board whose SSH connection cannot open as this adb-like state.
OFFLINE = "offline"
_X86_MACHINES = frozenset({"x86_64", "i386", "i486", "i586", "i686"})
#: Importing TVM on a small ARM board takes seconds.
RUNTIME_CHECK_TIMEOUT_S = 120.0


def board_tracker_key(board: BoardSettings) -> str:
    """The key the board's RPC server registers under: ``tracker_key``, else ``board-<name>``."""
    return board.tracker_key or f"board-{board.name}"


def uses_forward(board: BoardSettings, tracker_host: str) -> bool:
    """Whether the board's server reaches the tracker through an SSH remote forward.

    ``auto`` forwards when the board would dial a loopback tracker address from
    another machine (it would reach itself, not farm's host).
    """
    if board.tracker_via == "auto":
        return is_loopback(tracker_host) and not is_loopback(board.host)
    return board.tracker_via == "forward"


def facts_from_output(serial: str, output: bytes | str) -> dict[str, Any]:
    """The facts record of a board from :func:`farm.boards.commands.facts_argv`'s output.

    Keys: ``kind`` ("board"), ``abi`` and ``abis`` (``uname -m``), ``model`` (the
    device-tree model, else cpuinfo's ``Hardware``/``Model``/``model name``),
    ``soc`` (the same), ``kernel``, ``num_cores`` (``nproc``), ``mem_total_kb``,
    ``cpu_flags`` (the first processor's ``Features``/``flags``), ``serial``,
    ``emulated`` (:func:`is_emulated`: then ``cpu_flags`` is empty, as the
    host's flags say nothing of the emulated CPU, and ``model`` says so).

    Raises:
        PhoneFault: the output is cut short or unreadable.
    """
    try:
        machine, kernel, nproc, cpuinfo_text, dt_model, meminfo_text = commands.sections(output, 6)
        cpuinfo = parse_proc_cpuinfo(cpuinfo_text)
        meminfo = parse_proc_meminfo(meminfo_text)
        num_cores = int(nproc.strip())
    except ValueError as exc:
        raise PhoneFault(serial, f"unreadable board facts: {exc}") from exc
    machine = machine.strip()
    if not machine:
        raise PhoneFault(serial, "unreadable board facts: empty uname -m")
    extra = cpuinfo.extra
    model = (dt_model.strip() or cpuinfo.hardware or extra.get("Model", "")
             or _first_block_value(cpuinfo_text, "model name"))
    flags = cpuinfo.processors[0].features or tuple(
        _first_block_value(cpuinfo_text, "flags").split())
    emulated = is_emulated(machine, cpuinfo_text)
    if emulated:
        model, flags = f"{machine} under QEMU user mode on {model or 'an x86 host'}", ()
    return {
        "kind": KIND, "serial": serial, "abi": machine, "abis": [machine], "model": model,
        "soc": model, "kernel": kernel.strip(), "num_cores": num_cores,
        "mem_total_kb": meminfo["MemTotal"], "cpu_flags": list(flags), "emulated": emulated,
    }


def is_emulated(machine: str, cpuinfo_text: str) -> bool:
    """Whether a board's user space is emulated: ``uname -m`` and ``/proc/cpuinfo`` disagree.

    Under QEMU user mode an emulated process's ``uname`` reports the guest
    machine (``aarch64``) while ``/proc/cpuinfo`` is the host kernel's, an x86
    one (``vendor_id``/``flags`` lines; ARM kernels write ``CPU implementer``
    and ``Features``). QEMU 7.2 (Debian 12) passes cpuinfo through for AArch64
    guests (linux-user/syscall.c emulates it for a few other guests only).
    """
    x86_kernel = bool(_first_block_value(cpuinfo_text, "vendor_id")
                      or _first_block_value(cpuinfo_text, "flags"))
    return x86_kernel != (machine in _X86_MACHINES)


def _first_block_value(cpuinfo_text: str, key: str) -> str:
    for line in cpuinfo_text.split("\n"):
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return value.strip()
    return ""


class BoardController:
    """Every ``[[boards]]`` entry of farm's settings; see the module docstring.

    Args:
        boards: the boards' settings.
        tracker_host: the address boards dial the tracker at, unless a board
            sets its own ``tracker_host``.
        tracker_port: the tracker's port.
        tracker_local: the tracker as this host reaches it (what a board's SSH
            forward connects to); None = ``(tracker_host, tracker_port)``.
    """

    kind = KIND

    def __init__(self, boards: Sequence[BoardSettings], tracker_host: str,
                 tracker_port: int, tracker_local: tuple[str, int] | None = None) -> None:
        self.boards = {board.name: board for board in boards}
        self.tracker_host = tracker_host
        self.tracker_port = tracker_port
        self.tracker_local = tracker_local or (tracker_host, tracker_port)
        self._lock = threading.Lock()
        self._clients: dict[str, SshClient] = {}
        self._keys: dict[str, str] = {}  # serial -> the key served, where not its own
        self._unreachable: dict[str, str | None] = {}  # the last reason discover logged

    @classmethod
    def from_settings(cls, settings: Settings) -> BoardController:
        """The controller of ``settings.boards``; boards dial ``tracker.phone_host`` or ``host``."""
        tracker = settings.tracker
        local = "127.0.0.1" if tracker.host in ("0.0.0.0", "") else tracker.host  # noqa: S104
        return cls(settings.boards, tracker.phone_host or tracker.host, tracker.port,
                   (local, tracker.port))

    @classmethod
    def from_context(cls, context: ControllerContext) -> BoardController:
        """Build from farm's settings (no services needed).

        Raises:
            ConfigError: no settings were given.
        """
        settings = context.require_settings(cls.kind)
        return cls.from_settings(settings)

    def board(self, serial: str) -> BoardSettings:
        """The settings of board ``serial``.

        Raises:
            PhoneFault: no ``[[boards]]`` entry has that name (it was removed from the config).
        """
        if serial not in self.boards:
            raise PhoneFault(serial, "no [[boards]] entry has this name")
        return self.boards[serial]

    def ssh(self, serial: str) -> SshClient:
        """The board's SSH client (one connection, opened on first use)."""
        board = self.board(serial)
        with self._lock:
            client = self._clients.get(serial)
            if client is None:
                client = self._clients[serial] = SshClient(board)
            return client

    def close(self) -> None:
        """Close every SSH connection (servers keep running on the boards)."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    # -- the protocol ----------------------------------------------------------------

    def discover(self) -> list[Discovered]:
        """Every configured board: ``device`` if its SSH connection opens, else ``offline``.

        Boards are tried in parallel, so an unreachable one costs one
        ``connect_timeout_s``, not one per board.
        """
        names = list(self.boards)
        if not names:
            return []
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(names)),
                                                   thread_name_prefix="farm-board-ssh") as pool:
            reasons = list(pool.map(lambda name: self.ssh(name).unreachable_reason(), names))
        for name, reason in zip(names, reasons, strict=True):
            if reason != self._unreachable.get(name):  # say it once, not every sweep
                if reason is None:
                    log.info("board_reachable", serial=name)
                else:
                    log.warning("board_unreachable", serial=name, reason=reason)
                self._unreachable[name] = reason
        return [Discovered(name, OFFLINE if reason else ADB_STATE_DEVICE)
                for name, reason in zip(names, reasons, strict=True)]

    def facts(self, serial: str) -> dict[str, Any]:
        """The board's facts (:func:`facts_from_output`) in one SSH round trip.

        Raises:
            PhoneFault: SSH failed or the output is unreadable.
        """
        return facts_from_output(serial, self.ssh(serial).run(commands.facts_argv()).stdout)

    def check_runtime(self, serial: str) -> str:
        """Check the board can run its configured RPC server.

        Returns:
            TVM's version for ``server = "python"``, else the ``tvm_rpc`` path.

        Raises:
            ToolMissing: the interpreter, TVM or ``tvm_rpc`` is not on the board.
            PhoneFault: SSH failed.
        """
        board = self.board(serial)
        argv = commands.runtime_check_argv(board)
        result = self.ssh(serial).run(argv, timeout_s=RUNTIME_CHECK_TIMEOUT_S, check=False)
        if result.exit_code == 0:
            return result.stdout.decode(errors="replace").strip() or board.server
        detail = result.stderr.decode(errors="replace").strip().splitlines()
        why = detail[-1] if detail else f"exit {result.exit_code}"
        if board.server == "python":
            raise ToolMissing(f"tvm on board {serial}",
                              f"{board.python} cannot import tvm.exec.rpc_server ({why}); "
                              f"install TVM's runtime there (pip install apache-tvm) or set "
                              f"python/server in its [[boards]] entry")
        raise ToolMissing(f"tvm_rpc on board {serial}",
                          f"{board.server} is not an executable file there; build "
                          "apps/cpp_rpc for the board or fix server in its [[boards]] entry")

    def start_server(self, serial: str) -> None:
        """Check the runtime, then (re)start the RPC server toward the tracker under its key.

        Raises:
            ToolMissing: the board has no TVM runtime (:meth:`check_runtime`).
            PhoneFault: SSH failed or the server did not start.
        """
        board = self.board(serial)
        self.check_runtime(serial)
        address = board.tracker_host or self.tracker_host
        if uses_forward(board, address):
            port = self.ssh(serial).reverse(self.tracker_local)
            tracker, custom_addr = f"127.0.0.1:{port}", board.host
        else:
            tracker, custom_addr = f"{address}:{self.tracker_port}", None
        key = self._keys.get(serial) or board_tracker_key(board)
        server = commands.server_argv(board, tracker, key, custom_addr)
        result = self.ssh(serial).run(commands.start_server_argv(board, server))
        pid = result.stdout.decode(errors="replace").strip()
        if not pid.isdigit():
            raise PhoneFault(serial, f"the RPC server did not start (no pid in "
                                     f"{board.work_dir}/{commands.PIDFILE})")
        log.info("board_server_started", serial=serial, pid=int(pid), tracker=tracker, key=key)

    def serve(self, serial: str, key: str) -> None:
        """Restart the board's RPC server under ``key``; later starts keep it.

        Raises:
            ToolMissing, PhoneFault: as :meth:`start_server`.
        """
        with self._lock:
            self._keys[serial] = key
        self.start_server(serial)

    def stop_server(self, serial: str) -> None:
        """Kill the server's process group on the board; failures are logged, never raised."""
        try:
            self.ssh(serial).run(commands.stop_server_argv(self.board(serial)))
        except FarmError as exc:
            log.warning("board_server_stop_failed", serial=serial, reason=str(exc))

    def read_health(self, serial: str, at: datetime, *,
                    registered: bool | None = None) -> HealthReading:
        """Thermal zones, the server process, free space, load and memory in one round trip.

        Raises:
            PhoneFault: SSH failed or the output is unreadable.
        """
        output = self.ssh(serial).run(commands.health_argv(self.board(serial))).stdout
        return reading_from_output(serial, at, output, registered=registered)

    def recovery_steps(self, serial: str) -> list[RecoveryStep]:
        """Restart the server; then reboot, only where the board's ``reboot_allowed``."""
        steps = [RecoveryStep("restart_app", lambda: self.start_server(serial))]
        if self.board(serial).reboot_allowed:
            steps.append(RecoveryStep("reboot", lambda: self._reboot(serial),
                                      comes_back_alone=True))
        return steps

    def _reboot(self, serial: str) -> None:
        board = self.board(serial)
        client = self.ssh(serial)
        try:
            client.run(commands.reboot_argv(board), timeout_s=board.command_timeout_s)
        except SshError as exc:
            if exc.exit_code != -1:  # -1: the connection dropped as the board went down
                raise
        finally:
            client.close()

    def compile_target(self, facts: Mapping[str, Any], device: str = "cpu") -> TargetSpec:
        """``llvm`` for the board's ``uname -m``, linked by its ``cc`` (host compiler if native).

        Raises:
            SpecError: a processor other than ``cpu``, or an unknown machine.
            PhoneFault: the facts have no ``abi`` (never read).
            ToolMissing: a cross target without an installed cross compiler.
        """
        serial = str(facts.get("serial") or "board")
        if device != "cpu":
            raise SpecError("params.device", f"a board runs kernels on its cpu, not {device!r}")
        machine = facts.get("abi")
        if not machine:
            raise PhoneFault(serial, "no uname -m in the board's facts; it was never set up")
        target = board_target(str(machine), int(facts.get("num_cores") or 0))
        cc = self.boards[serial].cc if serial in self.boards else None
        return TargetSpec(target, target, board_linker(target, cc))

    def gating_reading(self, serial: str, at: datetime) -> ThermalReading:
        """The board's thermal zones only (one short round trip).

        Raises:
            PhoneFault: SSH failed or the output is unreadable.
        """
        board = self.board(serial)
        output = self.ssh(serial).run(commands.health_argv(board, thermal_only=True)).stdout
        try:
            types, temps = commands.sections(output, 2)
            zones = parse_thermal_zones(types, temps)
        except ValueError as exc:
            raise PhoneFault(serial, f"unreadable board thermal zones: {exc}") from exc
        raw = BoardRaw(zone_temps_c=[zone.temp_c for zone in zones])
        return ThermalReading(serial, at, ADB_STATE_DEVICE, kind=KIND,
                              readings=declared(KIND).read(raw))

    def tracker_key(self, serial: str) -> str:
        """The board's tracker key (:func:`board_tracker_key`)."""
        return board_tracker_key(self.board(serial))
