"""Whether farmd's dispatcher may claim now: not while its tracker is down or being rejoined.

A tracker that dies takes every phone's registration with it, and the stock
app notices only after a 300 s accept timeout (``ConnectTrackerServerProcessor.java``
in apache/tvm), so once a new tracker serves, farmd's fleet starts the servers
again (:meth:`farm.fleet.manager.FleetManager.tracker_restarted`: the restart
makes every server's observed state stale and the fleet's one reconcile loop
serves each device again, on its own task thread). A job claimed in between
would ask the tracker for a phone that is not there: its child fails to connect
(an outage, handed back at no cost but spent as an attempt row), or, claimed
onto a phone whose server is being restarted under it, loses its session and
fails as the phone's fault, which costs the job a try (measured on a virtual
phone before this gate: ``no server of key ... within 60 s``). So the
dispatcher asks this gate before each tick's claims
(:class:`farm.runner.dispatcher.Dispatcher`, ``gate``) and the job stays
queued, costing nothing, until the new tracker knows the fleet again.

The gate is closed from the moment farmd starts a new tracker (before that
tracker answers, so no tick slips in between the start and the fleet marking
its servers stale) until no claimable device waits to be served to the new
tracker (:meth:`~farm.fleet.manager.FleetManager.unjoined`). A device whose
serve failed is unhealthy (no job goes there) and is not waited for, so one
broken phone does not hold the farm.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["TrackerGate"]


class TrackerGate:
    """The dispatcher's gate for farmd's own tracker (callable: the reason to wait, or None).

    Args:
        alive: whether farmd's tracker process runs now (a dead one is seen at
            once, before the 5 s service watch restarts it).
        where: ``host:port`` of the tracker, for the reason.
        unjoined: how many claimable devices the new tracker does not know yet
            (:meth:`farm.fleet.manager.FleetManager.unjoined`).

    Thread-safe: the service watch calls :meth:`restarting` and :meth:`rejoining`,
    the dispatcher's thread calls the gate.
    """

    def __init__(self, alive: Callable[[], bool], where: str,
                 unjoined: Callable[[], int]) -> None:
        self.alive = alive
        self.where = where
        self.unjoined = unjoined
        self._lock = threading.Lock()
        self._restarting = False
        self._rejoining = False

    def __call__(self) -> str | None:
        """Why no job may be claimed now, or None."""
        if not self.alive():
            return f"the tracker {self.where} is down (farmd restarts it)"
        with self._lock:
            if self._restarting:
                return f"the tracker {self.where} is restarting"
            if not self._rejoining:
                return None
            left = self.unjoined()
            if left:
                return (f"the tracker {self.where} restarted; {left} phone(s) "
                        "registering again")
            self._rejoining = False
        return None

    @property
    def waiting(self) -> bool:
        """Whether a restart is still being rejoined (the gate may open at the next look)."""
        with self._lock:
            return self._restarting or self._rejoining

    def restarting(self) -> None:
        """Close the gate: farmd starts a new tracker (call before starting it)."""
        with self._lock:
            self._restarting = True

    def rejoining(self) -> None:
        """The new tracker serves and the fleet knows it: open once no device is left to serve.

        Call after :meth:`~farm.fleet.manager.FleetManager.tracker_restarted`.
        """
        with self._lock:
            self._restarting = False
            self._rejoining = True
