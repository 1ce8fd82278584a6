"""Run argv lists on a Linux board over SSH: the only importer of paramiko.

Why paramiko rather than asyncssh: the device controller's methods are called
from the fleet manager's sweep threads and the attempt child, all synchronous;
paramiko's blocking API fits them without an event loop to run and bridge, and
it is maintained by the same people as Fabric. One :class:`SshClient` holds one
SSH connection per board, opened on first use and reopened after it drops; a
lock serialises opening it (paramiko's Transport multiplexes channels, so
commands themselves may run concurrently).

Like ``farm/adb``, this layer is thin: it runs an argv list (joined with
:func:`shlex.join`, as the SSH protocol wants one command string), puts a
deadline on every call, returns bytes and the exit code, and raises typed
errors. It never parses, retries or reboots.

Errors (all :class:`~farm.errors.PhoneFault`, so the queue retries elsewhere)::

    PhoneFault
     +-- SshUnreachable   connect, host key or authentication failed
     +-- SshError         the command exited non-zero (check=True)
     +-- SshTimeout       the command outlived its deadline
"""

from __future__ import annotations

import select
import shlex
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import paramiko

from farm.config import BoardSettings
from farm.errors import PhoneFault
from farm.ssh.forward import open_reverse

__all__ = ["SshClient", "SshError", "SshResult", "SshTimeout", "SshUnreachable"]

_READ_CHUNK = 65536
_POLL_S = 0.5  # longest wait in select(); a deadline is still checked after each
_STDERR_EXCERPT = 400


class SshUnreachable(PhoneFault):
    """The board's SSH server could not be reached, or refused the host key or our key."""

    def __init__(self, serial: str, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(serial, f"ssh {address}: {reason}")


class SshError(PhoneFault):
    """A remote command exited non-zero.

    Attributes:
        argv: the command as run.
        exit_code: its exit status (127: not found; -1: no status, the channel closed).
        stderr: its standard error, decoded.
    """

    def __init__(self, serial: str, argv: Sequence[str], exit_code: int, stderr: str) -> None:
        self.argv = list(argv)
        self.exit_code = exit_code
        self.stderr = stderr
        detail = stderr.strip()[-_STDERR_EXCERPT:] or "no stderr"
        super().__init__(serial, f"{shlex.join(argv)} exited {exit_code}: {detail}")


class SshTimeout(PhoneFault):
    """A remote command did not finish within ``timeout_s`` seconds."""

    def __init__(self, serial: str, argv: Sequence[str], timeout_s: float) -> None:
        self.argv = list(argv)
        self.timeout_s = timeout_s
        super().__init__(serial, f"{shlex.join(argv)} timed out after {timeout_s:g} s")


@dataclass(frozen=True)
class SshResult:
    """What a remote command left: exit status and both outputs as bytes."""

    exit_code: int
    stdout: bytes
    stderr: bytes


class SshClient:
    """One board's SSH connection; thread-safe.

    Args:
        board: the board's ``[[boards]]`` settings (address, user, key, host key policy,
            deadlines).
    """

    def __init__(self, board: BoardSettings) -> None:
        self.board = board
        self.address = f"{board.user}@{board.host}:{board.port}"
        self._lock = threading.Lock()
        self._client: paramiko.SSHClient | None = None
        self._reverses: dict[tuple[str, int], int] = {}  # host-side target -> board port

    def _connect(self) -> paramiko.SSHClient:
        board = self.board
        client = paramiko.SSHClient()
        if board.known_hosts is not None:
            if not board.known_hosts.exists() and board.host_key_policy == "accept-new":
                board.known_hosts.touch(mode=0o600)
            client.load_host_keys(str(board.known_hosts))
        else:
            client.load_system_host_keys()
        client.set_missing_host_key_policy(
            paramiko.AutoAddPolicy() if board.host_key_policy == "accept-new"
            else paramiko.RejectPolicy())
        try:
            client.connect(
                board.host, port=board.port, username=board.user,
                key_filename=str(board.key_file) if board.key_file else None,
                timeout=board.connect_timeout_s, banner_timeout=board.connect_timeout_s,
                auth_timeout=board.connect_timeout_s, channel_timeout=board.connect_timeout_s,
                allow_agent=board.key_file is None, look_for_keys=board.key_file is None,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise SshUnreachable(board.name, self.address,
                                 "host key changed since it was recorded in known_hosts") from exc
        except paramiko.SSHException as exc:
            client.close()
            reason = str(exc) or type(exc).__name__
            if "not found in known_hosts" in reason:
                reason += ("; add it (ssh-keyscan) or set host_key_policy = \"accept-new\"")
            raise SshUnreachable(board.name, self.address, reason) from exc
        except (OSError, EOFError) as exc:
            client.close()
            raise SshUnreachable(board.name, self.address, str(exc) or type(exc).__name__) from exc
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
        return client

    def _transport(self) -> paramiko.Transport:
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is None or not transport.is_active():
                if self._client is not None:
                    self._client.close()
                self._client = None
                self._client = self._connect()
                transport = self._client.get_transport()
                if transport is not None:
                    self._reopen_reverses(transport)
            if transport is None:  # connect() returned without a transport
                raise SshUnreachable(self.board.name, self.address, "no SSH transport")
            return transport

    def _reopen_reverses(self, transport: paramiko.Transport) -> None:
        """Ask a new connection for the forwards the old one had, on the same board ports."""
        for target, port in self._reverses.items():
            try:
                open_reverse(transport, port, target)
            except paramiko.SSHException as exc:
                raise SshUnreachable(self.board.name, self.address,
                                     f"remote forward of port {port} refused: {exc}") from exc

    def reverse(self, target: tuple[str, int]) -> int:
        """A port on the board's loopback that reaches ``target`` here (:mod:`farm.ssh.forward`).

        The forward is made once and made again, on the same board port, each
        time the connection is reopened.

        Raises:
            SshUnreachable: no connection, or the board's sshd refused the forward.
        """
        transport = self._transport()
        with self._lock:
            if target not in self._reverses:
                try:
                    self._reverses[target] = open_reverse(transport, 0, target)
                except paramiko.SSHException as exc:
                    raise SshUnreachable(self.board.name, self.address,
                                         f"remote forward refused: {exc}") from exc
            return self._reverses[target]

    def unreachable_reason(self) -> str | None:
        """None when the connection is up (opened if needed), else why not; never raises."""
        try:
            self._transport()
        except PhoneFault as exc:
            return str(exc)
        return None

    def run(self, argv: Sequence[str], *, timeout_s: float | None = None,
            check: bool = True) -> SshResult:
        """Run one command on the board and wait for it.

        Args:
            argv: the command and its arguments; joined with :func:`shlex.join`,
                so no argument is ever read by the remote shell.
            timeout_s: deadline for the whole command; None = the board's
                ``command_timeout_s``.
            check: raise :class:`SshError` on a non-zero exit status.

        Returns:
            Its exit status and outputs.

        Raises:
            SshUnreachable: no connection could be made.
            SshTimeout: the command outlived the deadline (its channel is closed).
            SshError: it exited non-zero and ``check`` is set.
        """
        if not argv:
            raise ValueError("empty argv")
        timeout_s = self.board.command_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        transport = self._transport()
        try:
            channel = transport.open_session(timeout=self.board.connect_timeout_s)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise SshUnreachable(self.board.name, self.address,
                                 f"cannot open a channel: {exc}") from exc
        out, err = bytearray(), bytearray()
        with channel:
            channel.exec_command(shlex.join(argv))
            channel.shutdown_write()
            while True:
                if channel.recv_ready():
                    out += channel.recv(_READ_CHUNK)
                elif channel.recv_stderr_ready():
                    err += channel.recv_stderr(_READ_CHUNK)
                elif channel.exit_status_ready() and channel.eof_received:
                    break
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise SshTimeout(self.board.name, argv, timeout_s)
                    try:
                        select.select([channel], [], [], min(remaining, _POLL_S))
                    except (OSError, ValueError):  # channel closed under us
                        break
            exit_code = channel.recv_exit_status() if channel.exit_status_ready() else -1
        result = SshResult(exit_code, bytes(out), bytes(err))
        if check and exit_code != 0:
            raise SshError(self.board.name, argv, exit_code, result.stderr.decode(errors="replace"))
        return result

    def close(self) -> None:
        """Close the connection (a later :meth:`run` opens a new one); never raises."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

