"""Optional device-controller capabilities: what only some kinds can do, asked by ``isinstance``.

Apart from :class:`~farm.controllers.base.DeviceController` (every kind) and
:class:`~farm.controllers.base.AppMemoryReader`, a kind may implement::

    class AppEventSource(Protocol):                # its server's deaths, as they happen
        def open_app_events(self, serial) -> AppEvents   # AppEvents: deaths(), close()
        def note_crash(self, serial) -> None             # a crash handled: not news to a sweep

    class LogReader(Protocol):                     # the device's own log
        log_source: str                                  # e.g. "logcat"
        def log_tail(self, serial, lines) -> list[str]   # the last lines, oldest first

    class Detachable(Protocol):                    # host-side links to the device
        def detach(self, serial) -> None                 # close them; its server keeps serving

    class TrackedKind(Protocol):                   # a tracker reports them, not discover()
        tracked = True

The fleet asks for a capability, never for a kind's name: a kind without
one is left alone where it would be used (no event stream: the sweep alone
notices a dead server; no log: the device page says so; not detachable: farmd
stops its server at its own stop; not tracked: each sweep calls ``discover``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from farm.device.eventlog import AppDeath

__all__ = ["AppEventSource", "AppEvents", "Detachable", "LogReader", "TrackedKind"]


class AppEvents(Protocol):
    """One open follower of a device's app deaths (a ``logcat -b events`` on a phone)."""

    def deaths(self) -> Iterator[AppDeath]:
        """Each death of the RPC app's processes, as it is logged, until the follower ends.

        Raises:
            PhoneFault: the device's transport failed while following.
        """
        ...

    def close(self) -> None:
        """End the follower (from any thread); :meth:`deaths` then ends. Never raises."""
        ...


@runtime_checkable
class AppEventSource(Protocol):
    """A controller that reports its RPC server's deaths when they happen."""

    def open_app_events(self, serial: str) -> AppEvents:
        """Start following the device's app deaths from now on (none logged before).

        Raises:
            PhoneFault: the device's clock is unreadable, or the follower did not start.
        """
        ...

    def note_crash(self, serial: str) -> None:
        """A crash seen on the event stream was handled: not news for the next health sweep."""
        ...


@runtime_checkable
class LogReader(Protocol):
    """A controller that can read the tail of a device's own log (the device page's)."""

    #: What the log is, in the field's word (``"logcat"``).
    log_source: str

    def log_tail(self, serial: str, lines: int) -> list[str]:
        """The last ``lines`` lines of the device's log, oldest first.

        Raises:
            PhoneFault: the device did not answer within the read's deadline.
        """
        ...


@runtime_checkable
class Detachable(Protocol):
    """A controller whose device keeps serving without farmd: farmd only drops its own links."""

    def detach(self, serial: str) -> None:
        """Close the host-side links to the device (tunnels, relays); never raises.

        Called when the device left its transport and when farmd stops: the
        server on the device is left running, unlike
        :meth:`~farm.controllers.base.DeviceController.stop_server`.
        """
        ...


@runtime_checkable
class TrackedKind(Protocol):
    """A controller whose devices a tracker reports (adb's), so a sweep does not discover them."""

    #: Always True: its devices' transport states arrive as events, not from ``discover``.
    tracked: bool
