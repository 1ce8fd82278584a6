"""The TVM RPC app's ``:RPCProcess`` as a real host process in its own process group.

:meth:`RpcProcess.start` takes the device port the stock app would bind (the
first free one from 5001, ``ConnectTrackerServerProcessor.java``) by binding
its real listener, resolves the tracker address through the phone's network
(:meth:`PhoneNet.outbound`, so a usb-only phone reaches it only through ``adb
reverse``), spawns :mod:`farm.virtual.rpc_server_main` with that socket and
``start_new_session=True``, and publishes the device port once the child
listens. :meth:`RpcProcess.stop` SIGKILLs the whole group, as Android's
ActivityManager kills an app process (and with it the session children TVM's
server forks).

Port spaces: in ``lan`` mode phones share the host's ports, so the device port
is also the real port and must be free on the host; in ``usb-only`` mode each
phone has its own device ports and the real listener takes an ephemeral port.
Choosing and binding the port is one step in this process, so lan phones
started together cannot choose the same one (a real phone has its own network
stack and never meets that race).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

from farm.netaddr import bind_listener
from farm.procs import signal_group
from farm.virtual.contracts import PhoneNet
from farm.virtual.throttle import Throttle

MAX_SERVER_PORT = 5555  # ConnectTrackerServerProcessor.MAX_SERVER_PORT
LISTEN_TIMEOUT_S = 30.0


class RpcStartError(RuntimeError):
    """The RPC process could not start: no free port, bind failure or early exit.

    Not a FarmError: the Android model turns it into the app's crash
    (``FATAL EXCEPTION`` in logcat), which is what farm then sees.
    """


def bind_device_port(net: PhoneNet, first_port: int = 5001) -> tuple[int, socket.socket]:
    """Take the port the stock app would bind, first free from ``first_port`` to 5555.

    Returns:
        The device port and its real listening socket: ``127.0.0.1:<device
        port>`` in lan mode, an ephemeral loopback port in usb-only mode.

    Raises:
        RpcStartError: every port is taken (the app throws BindException).
    """
    for port in range(first_port, MAX_SERVER_PORT + 1):
        if net.device_port_in_use(port):
            continue
        try:
            listener = bind_listener("127.0.0.1", port if net.mode == "lan" else 0, backlog=1)
        except OSError:  # lan: taken on the host, by another phone or any process
            continue
        return port, listener
    raise RpcStartError(f"no free device port in {first_port}..{MAX_SERVER_PORT}")


class RpcProcess:
    """A running ``:RPCProcess``; create it with :meth:`start`."""

    def __init__(
        self,
        net: PhoneNet,
        proc: asyncio.subprocess.Process,
        device_port: int,
        real_port: int,
        log_path: Path,
    ) -> None:
        self._net = net
        self._proc = proc
        self.device_port = device_port
        self.real_port = real_port
        self.log_path = log_path
        self.pid: int = proc.pid
        self._throttle = Throttle(proc.pid)
        self._reaper = asyncio.ensure_future(self._reap())

    @classmethod
    async def start(
        cls,
        *,
        net: PhoneNet,
        tracker_host: str,
        tracker_port: int,
        key: str,
        log_path: Path,
        work_dir: Path | None = None,
        stale_timeout_s: float | None = None,
    ) -> RpcProcess:
        """Spawn the RPC process and return once it listens and its port is published.

        Args:
            net: the phone's network.
            tracker_host: tracker address as typed into the app (phone's view).
            tracker_port: tracker port as typed into the app.
            key: tracker key, e.g. ``android``.
            log_path: JSON-lines event log of the process (its stderr too).
            work_dir: parent folder for session directories (the app's cache dir).
            stale_timeout_s: accept timeout before re-registering (300 s in the app).

        Raises:
            RpcStartError: no free port, or the child exited before listening.
        """
        device_port, listener = bind_device_port(net)
        with listener:  # the child has its own copy once it is spawned
            real_tracker = await net.outbound(tracker_host, tracker_port)
            argv = [
                sys.executable, "-m", "farm.virtual.rpc_server_main",
                "--tracker", f"{real_tracker[0]}:{real_tracker[1]}",
                "--key", key,
                "--listen-fd", str(listener.fileno()),
                "--report-port", str(device_port),
                "--log", str(log_path),
            ]  # fmt: skip
            if work_dir is not None:
                argv += ["--work-dir", str(work_dir)]
            if stale_timeout_s is not None:
                argv += ["--stale-timeout-s", str(stale_timeout_s)]
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with log_path.open("ab") as stderr:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=stderr,
                    start_new_session=True,
                    pass_fds=(listener.fileno(),),
                )
        if proc.stdout is None:  # stdout=PIPE above
            signal_group(proc.pid)
            raise RuntimeError("rpc_server was started without a stdout pipe")
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=LISTEN_TIMEOUT_S)
        except TimeoutError:
            line = b""
        word, _, port_text = line.decode(errors="replace").strip().partition(" ")
        if word != "listening" or not port_text.isdigit():
            signal_group(proc.pid)
            await proc.wait()
            raise RpcStartError(
                f"RPC process exited with {proc.returncode} before listening; see {log_path}"
            )
        real_port = int(port_text)
        net.publish(device_port, "127.0.0.1", real_port)
        return cls(net, proc, device_port, real_port, log_path)

    async def _reap(self) -> int:
        """Wait for the process to end, then clean its group and its published port."""
        code = await self._proc.wait()
        signal_group(self.pid)
        await self._throttle.clear()
        self._net.unpublish(self.device_port)
        return code

    @property
    def speed(self) -> float:
        """The fraction of its speed the process group runs at (1.0: unthrottled)."""
        return self._throttle.speed

    async def set_speed(self, factor: float) -> None:
        """Run the whole process group (server and session children) at ``factor`` of its speed.

        Ignored once the process has ended.

        Raises:
            ValueError: ``factor`` is not in (0, 1].
        """
        if self.alive():
            await self._throttle.set_speed(factor)

    def alive(self) -> bool:
        """Whether the process has not exited yet."""
        return self._proc.returncode is None

    async def wait(self) -> int:
        """Wait for the process to exit; returns its exit code (-9 after SIGKILL)."""
        return await asyncio.shield(self._reaper)

    async def stop(self) -> int:
        """SIGKILL the process group, reap it and unpublish its port; idempotent.

        Returns:
            The exit code (-9 when this call killed it).
        """
        if not self._reaper.done():
            signal_group(self.pid)
        return await self.wait()
