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
queued, costing nothing, until the new tracker lists the apps again.

The gate opens on what the *new* tracker lists, not on the relaunches having
ended: it is closed from the moment farmd starts a new tracker (before that
tracker answers, so no tick slips in between the start and the relaunches),
while any relaunch runs, and until the new tracker's summary lists the key of
every phone whose relaunch registered. A relaunch that failed leaves its phone
unhealthy (no job goes there) and the gate stops waiting for it, so one broken
phone does not hold the farm.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

__all__ = ["TrackerGate"]

#: ``relaunch(on_done) -> {serial: tracker key}`` of the relaunches started;
#: ``on_done(serial, registered)`` ends each:
#: :meth:`farm.fleet.manager.FleetManager.relaunch_all`.
Relaunch = Callable[[Callable[[str, bool], None]], Mapping[str, str]]


class TrackerGate:
    """The dispatcher's gate for farmd's own tracker (callable: the reason to wait, or None).

    Args:
        alive: whether farmd's tracker process runs now (a dead one is seen at
            once, before the 5 s service watch restarts it).
        where: ``host:port`` of the tracker, for the reason.
        listed: the keys the tracker lists now, or None if it does not answer
            (:meth:`farm.fleet.manager.FleetManager.registered_keys`).
        on_open: called when the last relaunch ended (farmd wakes its dispatcher).

    Thread-safe: the service watch calls :meth:`restarting` and :meth:`relaunch`,
    the relaunch threads end it, the dispatcher's thread calls the gate.
    """

    def __init__(self, alive: Callable[[], bool], where: str,
                 listed: Callable[[], set[str] | None],
                 on_open: Callable[[], None] | None = None) -> None:
        self.alive = alive
        self.where = where
        self.listed = listed
        self.on_open = on_open
        self._lock = threading.Lock()
        self._restarting = False
        self._relaunching: set[str] = set()
        self._unlisted: dict[str, str] = {}  # serial -> key the new tracker must list

    def __call__(self) -> str | None:
        """Why no job may be claimed now, or None."""
        if not self.alive():
            return f"the tracker {self.where} is down (farmd restarts it)"
        with self._lock:
            if self._restarting:
                return f"the tracker {self.where} is restarting"
            if self._relaunching:
                return (f"the tracker {self.where} restarted; {len(self._relaunching)} phone(s) "
                        "registering again")
            if not self._unlisted:
                return None
            keys = self.listed()
            if keys is not None:
                self._unlisted = {s: k for s, k in self._unlisted.items() if k not in keys}
            if self._unlisted:
                return (f"the tracker {self.where} restarted; {len(self._unlisted)} phone(s) "
                        "not listed by it yet")
        return None

    @property
    def waiting(self) -> bool:
        """Whether a restart is still being rejoined (the gate may open at the next look)."""
        with self._lock:
            return self._restarting or bool(self._relaunching or self._unlisted)

    def restarting(self) -> None:
        """Close the gate: farmd starts a new tracker (call before starting it)."""
        with self._lock:
            self._restarting = True

    def relaunch(self, relaunch: Relaunch) -> set[str]:
        """Start the relaunches and hold the gate until the new tracker lists each.

        Returns:
            The serials whose relaunch started.
        """
        with self._lock:  # a relaunch that ends at once waits here until its set is known
            started = relaunch(self._done)
            self._relaunching |= set(started)
            self._unlisted.update(started)
            self._restarting = False
        return set(started)

    def _done(self, serial: str, registered: bool) -> None:
        with self._lock:
            if serial not in self._relaunching:
                return
            self._relaunching.discard(serial)
            if not registered:  # unhealthy now: no job goes there, nothing to wait for
                self._unlisted.pop(serial, None)
            ended = not self._relaunching
        if ended and self.on_open is not None:
            self.on_open()
