"""Tell systemd that farmd is ready, alive and stopping (sd_notify).

A thin wrapper over the ``sdnotify`` library (a well-kept pure-Python
implementation of ``sd_notify(3)``): it sends ``READY=1``, ``STATUS=...``,
``WATCHDOG=1`` and ``STOPPING=1`` as datagrams to the unix socket systemd
names in ``$NOTIFY_SOCKET`` (an abstract socket when it starts with ``@``).
Outside systemd (no ``NOTIFY_SOCKET``) every call is a no-op, so ``farmd`` runs
the same in a terminal, in tests and under ``Type=notify``.

The watchdog interval comes from ``$WATCHDOG_USEC`` (set by ``WatchdogSec=``);
``sd_watchdog_enabled(3)`` advises pinging at half of it, which
:meth:`SystemdNotifier.watchdog_interval_s` returns.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import sdnotify

from farm.errors import InfraFault


class SystemdNotifier:
    """sd_notify messages for one process; a no-op when not started by systemd.

    The socket is connected once, at construction (``sdnotify`` does so), from
    ``os.environ``. ``sdnotify`` is used with
    ``debug=True`` so that errors reach this wrapper, which maps them to
    :class:`~farm.errors.InfraFault` instead of letting the library hide them.
    """

    def __init__(self) -> None:
        """Connect to ``$NOTIFY_SOCKET`` when it is set.

        Raises:
            InfraFault: ``NOTIFY_SOCKET`` is set but the socket cannot be reached.
        """
        self.socket_path = os.environ.get("NOTIFY_SOCKET") or None
        self._watchdog_usec = self._parse_watchdog_usec(os.environ)
        self._notifier: sdnotify.SystemdNotifier | None = None
        if self.socket_path is None:
            return
        try:
            # sdnotify reads $NOTIFY_SOCKET itself and connects here.
            self._notifier = sdnotify.SystemdNotifier(debug=True)
        except OSError as exc:
            raise InfraFault(f"NOTIFY_SOCKET {self.socket_path}: {exc}") from exc

    @staticmethod
    def _parse_watchdog_usec(env: Mapping[str, str]) -> int | None:
        """``$WATCHDOG_USEC`` if it is meant for this process (``$WATCHDOG_PID``), else None."""
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if not usec.isdigit() or int(usec) == 0:
            return None
        if pid and pid != str(os.getpid()):
            return None  # inherited from a parent that systemd watches, not us
        return int(usec)

    @property
    def enabled(self) -> bool:
        """Whether messages go anywhere (``NOTIFY_SOCKET`` was set)."""
        return self._notifier is not None

    def watchdog_interval_s(self) -> float | None:
        """How often to call :meth:`watchdog`: half of ``WatchdogSec``; None if disabled."""
        if self._watchdog_usec is None:
            return None
        return self._watchdog_usec / 2 / 1_000_000

    def _send(self, message: str) -> None:
        """Send one datagram of ``KEY=value`` lines.

        Raises:
            InfraFault: the datagram could not be sent.
        """
        if self._notifier is None:
            return
        try:
            self._notifier.notify(message)
        except OSError as exc:
            raise InfraFault(f"sd_notify {message.splitlines()[0]!r} failed: {exc}") from exc

    @staticmethod
    def _status_line(status: str) -> str:
        """A ``STATUS=`` line; newlines would start a new key, so they become spaces."""
        return "STATUS=" + " ".join(status.splitlines())

    def ready(self, status: str | None = None) -> None:
        """Report start-up finished (``READY=1``), optionally with a status line.

        Raises:
            InfraFault: the datagram could not be sent.
        """
        lines = ["READY=1"] + ([self._status_line(status)] if status else [])
        self._send("\n".join(lines))

    def status(self, status: str) -> None:
        """Set the one-line status ``systemctl status farmd`` shows, e.g. ``"3 ready, 1 cooling"``.

        Raises:
            InfraFault: the datagram could not be sent.
        """
        self._send(self._status_line(status))

    def watchdog(self) -> None:
        """Ping the watchdog (``WATCHDOG=1``); call every :meth:`watchdog_interval_s`.

        Raises:
            InfraFault: the datagram could not be sent.
        """
        self._send("WATCHDOG=1")

    def stopping(self, status: str | None = None) -> None:
        """Report that shutdown (the graceful drain) began (``STOPPING=1``).

        Raises:
            InfraFault: the datagram could not be sent.
        """
        lines = ["STOPPING=1"] + ([self._status_line(status)] if status else [])
        self._send("\n".join(lines))
