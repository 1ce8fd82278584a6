"""SystemdNotifier: real datagrams on a real unix socket named by NOTIFY_SOCKET."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from farm.errors import InfraFault
from farm.supervise.systemd import SystemdNotifier


@pytest.fixture
def notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A bound datagram socket standing in for systemd's, exported as NOTIFY_SOCKET."""
    path = tmp_path / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    yield sock
    sock.close()


class TestSystemdNotifier:
    def test_noop_without_notify_socket(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Outside systemd every call succeeds and sends nothing."""
        monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
        notifier = SystemdNotifier()
        assert not notifier.enabled
        notifier.ready("up")
        notifier.status("idle")
        notifier.watchdog()
        notifier.stopping()

    def test_sends_each_message(self, notify_socket: socket.socket) -> None:
        """READY, STATUS, WATCHDOG and STOPPING arrive as separate datagrams, in order."""
        notifier = SystemdNotifier()
        assert notifier.enabled
        notifier.ready("3 phones ready")
        notifier.status("2 ready, 1 cooling")
        notifier.watchdog()
        notifier.stopping("draining 2 jobs")
        got = [notify_socket.recv(4096).decode() for _ in range(4)]
        assert got == [
            "READY=1\nSTATUS=3 phones ready",
            "STATUS=2 ready, 1 cooling",
            "WATCHDOG=1",
            "STOPPING=1\nSTATUS=draining 2 jobs",
        ]

    def test_status_cannot_inject_keys(self, notify_socket: socket.socket) -> None:
        """A multi-line status is folded into one STATUS= line, so it cannot add READY=1."""
        SystemdNotifier().status("bad\nREADY=1")
        assert notify_socket.recv(4096) == b"STATUS=bad READY=1"

    def test_abstract_socket(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """An '@' NOTIFY_SOCKET reaches the Linux abstract socket of that name."""
        name = f"farm-test-notify-{os.getpid()}-{id(self)}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind("\0" + name)
            sock.settimeout(5)
            monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
            SystemdNotifier().watchdog()
            assert sock.recv(64) == b"WATCHDOG=1"

    def test_unreachable_socket_is_infra_fault(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A NOTIFY_SOCKET that names no socket raises InfraFault, not a hidden failure."""
        monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "missing"))
        with pytest.raises(InfraFault, match="NOTIFY_SOCKET"):
            SystemdNotifier()

    def test_send_after_socket_gone_is_infra_fault(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """If systemd's socket goes away, the next ping raises InfraFault."""
        path = tmp_path / "notify"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(path))
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        notifier = SystemdNotifier()
        sock.close()
        with pytest.raises(InfraFault, match="WATCHDOG=1"):
            notifier.watchdog()

    def test_watchdog_interval_is_half(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """WATCHDOG_USEC=30 s gives a 15 s ping interval, as sd_watchdog_enabled(3) advises."""
        monkeypatch.setenv("WATCHDOG_USEC", "30000000")
        monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
        assert SystemdNotifier().watchdog_interval_s() == 15.0

    def test_watchdog_for_another_pid_ignored(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A WATCHDOG_USEC inherited from a watched parent does not apply to this process."""
        monkeypatch.setenv("WATCHDOG_USEC", "30000000")
        monkeypatch.setenv("WATCHDOG_PID", "1")
        assert SystemdNotifier().watchdog_interval_s() is None

    def test_watchdog_disabled(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without WATCHDOG_USEC there is no interval."""
        monkeypatch.delenv("WATCHDOG_USEC", raising=False)
        assert SystemdNotifier().watchdog_interval_s() is None
