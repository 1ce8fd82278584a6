"""Virtual Linux boards: a real OpenSSH ``sshd`` on a loopback port, a sandbox folder each.

A :class:`VirtualBoard` is built from real parts, so farm reaches it exactly as
it reaches an RK3399 on the bench: over SSH, with a host key it must know and a
key it must present. Each board has:

* its own ``sshd`` (OpenSSH, run as the current user, or as root where tests run
  as root) listening on ``127.0.0.1:<free port>`` with a host key made for it
  and ``AuthorizedKeysFile`` holding only the key the test made;
* a sandbox folder: ``work/`` (its ``work_dir``: pidfile, server log) and
  ``sys/class/thermal/thermal_zone*`` (its ``sysfs_root``, a fake thermal zone
  :meth:`heat` writes); ``/proc`` and ``df`` are the host's own;
* nothing else: the RPC server is the real ``python -m tvm.exec.rpc_server`` that
  farm's board controller starts through SSH.

An ``arch="aarch64"`` board runs AArch64 code: its ``[[boards]]`` entry names
the AArch64 ``tvm_rpc`` (:mod:`farm.virtual.qemu`) as its server, which a
``bin/tvm_rpc`` script in its sandbox runs under QEMU user-mode emulation, and
its ``bin/uname`` is an AArch64 ``uname`` under QEMU too, so ``uname -m`` says
``aarch64`` as it does on any emulated userland; ``sshd``'s ``SetEnv`` puts
that ``bin/`` first on every login's ``PATH``. ``/proc/cpuinfo`` stays the
host's (QEMU 7.2 does not emulate it for AArch64), which is how farm tells the
board is emulated (:func:`farm.controllers.board.facts_from_output`). Kernels
are linked by Debian's ``aarch64-linux-gnu-g++``.

Faults: :meth:`kill_server` (SIGKILL the server's process group, as an OOM kill
would), :meth:`heat` (write a hot temperature into the fake zone),
:meth:`unplug` / :meth:`replug` (stop / start sshd: the board drops off the
network). Everything a board runs ends with it, also when the test process is
killed with ``kill -9`` (see :mod:`farm.virtual.board_main`).
"""

from __future__ import annotations

import getpass
import os
import secrets
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from farm.clock import wait_until
from farm.config import BoardSettings
from farm.netaddr import free_port
from farm.procs import signal_group, spawn
from farm.virtual.board_main import MARKER_VARIABLE, READY_TIMEOUT_S, accepts
from farm.virtual.qemu import Aarch64Runtime, ensure_runtime

__all__ = ["ARCHES", "PIDFILE", "THERMAL_ZONES", "VirtualBoard", "make_key"]

#: The machines a virtual board can be: the host's own, or AArch64 under QEMU.
ARCHES = ("host", "aarch64")
#: The cross compiler of an AArch64 board's kernels (Debian's g++-aarch64-linux-gnu).
AARCH64_CC = "aarch64-linux-gnu-g++"

#: The controller's pidfile in a board's work folder (see farm.boards.commands).
PIDFILE = "server.pid"
#: The fake thermal zones: (type, idle temperature in °C); :meth:`VirtualBoard.heat` sets zone 0.
THERMAL_ZONES = (("cpu-thermal", 41.0), ("gpu-thermal", 39.5))
STOP_TIMEOUT_S = 15.0


def make_key(path: Path) -> str:
    """Write a new ed25519 private key in OpenSSH format to ``path`` (mode 600).

    Returns:
        Its public key line (``ssh-ed25519 AAAA...``), also written to ``path.pub``.
    """
    key = Ed25519PrivateKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    path.with_name(path.name + ".pub").write_text(public + "\n")
    return public


class VirtualBoard:
    """One virtual board; :meth:`start` it, :meth:`stop` it (or use it as a context manager).

    Args:
        name: its name (the serial farm gives it).
        root: its sandbox folder (created).
        client_key: the private key farm logs in with; its ``.pub`` is authorized.
        arch: ``host`` (runs host code) or ``aarch64`` (runs AArch64 code under QEMU).

    Raises:
        ValueError: an unknown ``arch``.
    """

    def __init__(self, name: str, root: Path, client_key: Path, arch: str = "host") -> None:
        if arch not in ARCHES:
            raise ValueError(f"unknown virtual board arch {arch!r}; known: {', '.join(ARCHES)}")
        self.arch = arch
        self.name = name
        self.root = root
        self.client_key = client_key
        self.work_dir = root / "work"
        self.sysfs_root = root / "sys"
        self.port = 0
        self.host_public_key = ""
        self._marker = secrets.token_hex(8)
        self._keeper: subprocess.Popen[bytes] | None = None

    @property
    def bin_dir(self) -> Path:
        """The sandbox's ``bin/``, first on every login's ``PATH`` (AArch64 boards' wrappers)."""
        return self.root / "bin"

    def _write_emulated_bin(self, runtime: Aarch64Runtime) -> None:
        """``bin/tvm_rpc`` and ``bin/uname``: the AArch64 programs run under QEMU."""
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        for name, program in (("tvm_rpc", runtime.server), ("uname", runtime.uname)):
            script = self.bin_dir / name
            script.write_text(f'#!/bin/sh\nexec {shlex.join(runtime.argv(program))} "$@"\n')
            script.chmod(0o755)

    def _write_sandbox(self) -> Path:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for index, (zone_type, temp_c) in enumerate(THERMAL_ZONES):
            zone = self.sysfs_root / "class" / "thermal" / f"thermal_zone{index}"
            zone.mkdir(parents=True, exist_ok=True)
            (zone / "type").write_text(zone_type + "\n")
            (zone / "temp").write_text(f"{round(temp_c * 1000)}\n")
        ssh_dir = self.root / "ssh"
        self.host_public_key = make_key(ssh_dir / "host_ed25519")
        authorized = ssh_dir / "authorized_keys"
        authorized.write_text(self.client_key.with_name(self.client_key.name + ".pub").read_text())
        path_env = ""
        if self.arch == "aarch64":
            self._write_emulated_bin(ensure_runtime())
            path_env = f" PATH={self.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        self.port = free_port()
        config = ssh_dir / "sshd_config"
        config.write_text("\n".join([
            "ListenAddress 127.0.0.1",
            f"Port {self.port}",
            f"HostKey {ssh_dir / 'host_ed25519'}",
            f"AuthorizedKeysFile {authorized}",
            "PidFile none",
            "UsePAM no",
            "StrictModes no",  # the sandbox lives in a temp folder others can list
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "MaxSessions 64",
            f"SetEnv {MARKER_VARIABLE}={self._marker}{path_env}",
            "",
        ]))
        return config

    def start(self) -> VirtualBoard:
        """Make the sandbox and keys, start sshd, return once it accepts connections.

        Raises:
            RuntimeError: sshd did not start (its log is ``<root>/sshd.log``).
            ToolMissing: an AArch64 board without QEMU, the cross compiler or the
                aarch64 TVM wheels (:func:`farm.virtual.qemu.ensure_runtime`).
        """
        config = self._write_sandbox()
        self._keeper = spawn(
            [sys.executable, "-m", "farm.virtual.board_main", "--config", str(config),
             "--port", str(self.port), "--marker", self._marker,
             "--log", str(self.root / "sshd.log"), "--parent", str(os.getpid())],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        line = self._keeper.stdout.readline() if self._keeper.stdout else b""
        if line.strip() != b"ready":
            self.stop()
            raise RuntimeError(f"virtual board {self.name}: sshd did not start within "
                               f"{READY_TIMEOUT_S:g} s; see {self.root / 'sshd.log'}")
        return self

    def settings(self, **overrides: object) -> BoardSettings:
        """The ``[[boards]]`` entry that reaches this board (its host key in ``known_hosts``)."""
        known_hosts = self.root / "known_hosts"
        known_hosts.write_text(f"[127.0.0.1]:{self.port} {self.host_public_key}\n")
        fields: dict[str, object] = {
            "name": self.name, "host": "127.0.0.1", "port": self.port,
            "user": getpass.getuser(), "key_file": self.client_key,
            "known_hosts": known_hosts, "python": sys.executable, "server": "python",
            "work_dir": str(self.work_dir), "sysfs_root": str(self.sysfs_root),
            "connect_timeout_s": 20.0, "command_timeout_s": 60.0,
        }
        if self.arch == "aarch64":
            fields |= {"server": str(self.bin_dir / "tvm_rpc"), "cc": AARCH64_CC}
        return BoardSettings.model_validate(fields | overrides)

    # -- faults ------------------------------------------------------------------------

    def server_pid(self) -> int | None:
        """The RPC server's pid from the controller's pidfile, or None."""
        try:
            return int((self.work_dir / PIDFILE).read_text().strip())
        except (OSError, ValueError):
            return None

    def kill_server(self) -> bool:
        """SIGKILL the RPC server's process group; False when none was started."""
        pid = self.server_pid()
        if pid is None:
            return False
        signal_group(pid)
        return True

    def heat(self, to_c: float, zone: int = 0) -> None:
        """Write ``to_c`` °C into a fake thermal zone (the kernel's millidegrees)."""
        path = self.sysfs_root / "class" / "thermal" / f"thermal_zone{zone}" / "temp"
        path.write_text(f"{round(to_c * 1000)}\n")

    def cool(self) -> None:
        """Put every fake thermal zone back to its idle temperature."""
        for index, (_type, temp_c) in enumerate(THERMAL_ZONES):
            self.heat(temp_c, index)

    def unplug(self) -> None:
        """Stop sshd and drop its connections (the server keeps running, as on a real board).

        Returns once the port refuses connections.
        """
        self._signal_keeper(signal.SIGUSR1)
        wait_until(lambda: not accepts(self.port), READY_TIMEOUT_S, f"{self.name} unplugged")

    def replug(self) -> None:
        """Start sshd again on the same port; returns once it accepts connections."""
        self._signal_keeper(signal.SIGUSR2)
        wait_until(lambda: accepts(self.port), READY_TIMEOUT_S, f"{self.name} replugged")

    def _signal_keeper(self, signum: int) -> None:
        if self._keeper is None or self._keeper.poll() is not None:
            raise RuntimeError(f"virtual board {self.name} is not running")
        self._keeper.send_signal(signum)

    def stop(self) -> None:
        """End sshd and everything run on the board; idempotent."""
        keeper, self._keeper = self._keeper, None
        if keeper is None:
            return
        if keeper.poll() is None:
            keeper.terminate()
            try:
                keeper.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                signal_group(keeper.pid)
                keeper.wait()
        if keeper.stdout is not None:
            keeper.stdout.close()

    def __enter__(self) -> VirtualBoard:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
