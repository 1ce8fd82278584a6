"""Whether farmd's dispatcher may claim now: not while its tracker is down or being rejoined.

A tracker that dies takes every phone's registration with it, and the stock
app notices only after a 300 s accept timeout (``ConnectTrackerServerProcessor.java``
in apache/tvm), so farmd relaunches the apps once a new tracker serves
(:meth:`farm.daemon.Farmd.watch_services`). A job claimed in between would ask
the tracker for a phone that is not there: its child fails to connect (an
outage, handed back at no cost but spent as an attempt row), or, claimed right
after the restart onto a phone whose app was not relaunched, waits its whole
request deadline and fails as the phone's fault, which costs the job a try
(measured on a virtual phone before this gate: ``no server of key ... within
60 s``). So the dispatcher asks this gate before each tick's claims
(:class:`farm.runner.dispatcher.Dispatcher`, ``gate``) and the job stays
queued, costing nothing, until the apps registered again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["TrackerGate"]

#: ``relaunch(on_done) -> serials started``: :meth:`farm.fleet.manager.FleetManager.relaunch_all`.
Relaunch = Callable[[Callable[[str], None]], set[str]]


class TrackerGate:
    """The dispatcher's gate for farmd's own tracker (callable: the reason to wait, or None).

    Args:
        alive: whether farmd's tracker process runs now (a dead one is seen at
            once, before the 5 s service watch restarts it).
        where: ``host:port`` of the tracker, for the reason.
        on_open: called when the last relaunch ended (farmd wakes its dispatcher).

    Thread-safe: the service watch calls :meth:`relaunch`, the relaunch threads
    end it, the dispatcher's thread calls the gate.
    """

    def __init__(self, alive: Callable[[], bool], where: str,
                 on_open: Callable[[], None] | None = None) -> None:
        self.alive = alive
        self.where = where
        self.on_open = on_open
        self._lock = threading.Lock()
        self._pending: set[str] = set()

    def __call__(self) -> str | None:
        """Why no job may be claimed now, or None."""
        if not self.alive():
            return f"the tracker {self.where} is down (farmd restarts it)"
        with self._lock:
            if self._pending:
                return (f"the tracker {self.where} restarted; {len(self._pending)} phone(s) "
                        "registering again")
        return None

    def relaunch(self, relaunch: Relaunch) -> set[str]:
        """Start the relaunches and hold the gate until each has ended; returns their serials."""
        with self._lock:  # a relaunch that ends at once waits here until its set is known
            started = relaunch(self._done)
            self._pending |= started
        return started

    def _done(self, serial: str) -> None:
        with self._lock:
            if serial not in self._pending:
                return
            self._pending.discard(serial)
            opened = not self._pending
        if opened and self.on_open is not None:
            self.on_open()
