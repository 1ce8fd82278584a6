"""The fleet's look at the tracker: one shared summary, the addresses it gave, its generation.

Every device waiting for its server's registration asks the tracker twice a
second; :meth:`TrackerLook.summary` shares one answer among them. The address
each key was last given is kept across a tracker restart (where a client's
session may still run: :meth:`TrackerLook.in_session`), and each restart of
farmd's tracker bumps :attr:`TrackerLook.generation` and drops the dead
tracker's answer in one step.
"""

from __future__ import annotations

import threading

import structlog

from farm.clock import Clock
from farm.errors import FarmError
from farm.fleet.held import session_peer
from farm.tvm.tracker import ServerInfo, TrackerSummary, summary

__all__ = ["SUMMARY_TIMEOUT_S", "TrackerLook"]

log = structlog.get_logger(__name__)

#: Deadline of one summary request (s).
SUMMARY_TIMEOUT_S = 5.0


class TrackerLook:
    """Summaries of the tracker at ``tracker`` (``(host, port)``), shared and kept.

    Args:
        tracker: the tracker's ``(host, port)``.
        clock: the clock (its monotonic time ages the shared answer).
    """

    def __init__(self, tracker: tuple[str, int], clock: Clock) -> None:
        self._tracker = tracker
        self._clock = clock
        self._lock = threading.Lock()
        self._summary: tuple[float | None, TrackerSummary | None] = (None, None)
        #: key -> the last address a tracker gave for it.
        self.last_servers: dict[str, ServerInfo] = {}
        #: Bumped by each restart of farmd's tracker (:meth:`restarted`).
        self.generation = 0

    def summary(self, max_age_s: float = 0.0, quiet: bool = False) -> TrackerSummary | None:
        """The tracker's summary, or None if it does not answer.

        Args:
            max_age_s: an answer at most this old may be reused. Every phone
                that waits for its registration asks twice a second; sharing one
                answer keeps the tracker (one Python thread) at a couple of
                requests a second however many phones provision at once: 64
                phones asking on their own timed it out and farmd restarted it.
            quiet: log a failed answer at debug level (a poll every second
                would repeat the sweep's warning through a whole outage).
        """
        with self._lock:
            at, found = self._summary
            if at is not None and self._clock.monotonic() - at <= max_age_s:
                return found
            try:
                found = summary(*self._tracker, timeout_s=SUMMARY_TIMEOUT_S)
            except FarmError as exc:
                (log.debug if quiet else log.warning)("tracker_summary_failed", reason=str(exc))
                found = None
            else:  # kept across a tracker restart: where a session may still run
                self.last_servers.update({server.key: server for server in found.servers})
            self._summary = (self._clock.monotonic(), found)
            return found

    def restarted(self) -> int:
        """A new tracker serves: bump the generation and drop the dead one's answer; returns it."""
        with self._lock:  # an answer of the dead tracker says nothing of the new one
            self.generation += 1
            self._summary = (None, None)
            return self.generation

    def in_session(self, key: str) -> bool:
        """Whether a client on this host holds a session with the server last given for ``key``.

        Read from this host's TCP table against the address the tracker last
        handed out (:func:`farm.fleet.held.session_peer`); an address never
        seen counts as no session.
        """
        server = self.last_servers.get(key)
        return server is not None and session_peer(server) is not None
