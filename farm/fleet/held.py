"""Hand sessions: a phone held by a tracker session that farm did not open.

A person's own ``rpc.connect_tracker(host, port).request(key)`` takes the
phone's server off the tracker's queue for as long as the session lasts. In
TVM's tracker (``python/tvm/rpc/tracker.py``), a server registers with
``UPDATE_INFO`` (listed in ``server_info`` as ``server:<key>``) and offers
itself with ``PUT``, one entry in its key's queue; a ``REQUEST`` pops that
entry, and the server puts a new one only when its session ends (the stock
app closes its tracker connection and registers again;
``ConnectTrackerServerProcessor.java``). So in the tracker's ``summary()`` a
server *in use* is one still listed in ``server_info`` whose key's
``queue_info`` has ``free == 0``. If no farm attempt holds the phone (it is not
busy) and no session probe of farm's runs on it, the session is someone
else's.

The same summary is seen for a moment after farm's own attempt or probe
ended, before the server offered itself again; a phone is therefore marked
held outside only when two sweeps at least :data:`HELD_CONFIRM_S` apart both
see it held, and only while it is ``ready`` (:class:`HeldWatch`). Who holds it
is read from this host's TCP table (:func:`session_peer`): the session's
client is connected to the server's address as the tracker hands it out
(``127.0.0.1:<adb forward port>`` for a usb-only phone, so the client runs on
this host, and a usb-only phone with no client connected is not held: a
frozen app that took a ticket and never served looks the same in the summary).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

import psutil
import structlog

from farm.clock import Clock
from farm.netaddr import is_loopback
from farm.queue.models import DeviceState
from farm.queue.records import DeviceRecord
from farm.queue.store import Store
from farm.tvm.tracker import ServerInfo, TrackerSummary

__all__ = ["HELD_CONFIRM_S", "HELD_PREFIX", "HeldWatch", "held_reason", "held_servers",
           "session_peer"]

log = structlog.get_logger(__name__)

#: Two sightings at least this far apart make a phone held outside (see the module doc).
HELD_CONFIRM_S = 1.0
HELD_PREFIX = "held outside farm by a session"


def held_servers(summary: TrackerSummary) -> dict[str, ServerInfo]:
    """Servers in use, by tracker key: listed in ``server_info``, none free in their queue."""
    return {server.key: server for server in summary.servers
            if summary.queue(server.key).free == 0}


def session_peer(server: ServerInfo,
                 connections: Iterable[psutil._common.sconn] | None = None) -> str | None:
    """``host:port`` of a client connected to ``server``'s address on this host, or None.

    Args:
        server: the server as the tracker lists it.
        connections: TCP connections to look in; this host's (psutil) by default.
    """
    if connections is None:
        try:
            connections = psutil.net_connections(kind="tcp")
        except (psutil.Error, OSError):
            return None
    for conn in connections:
        raddr = conn.raddr
        if (conn.status == psutil.CONN_ESTABLISHED and raddr
                and raddr.port == server.port and raddr.ip == server.host):
            return f"{conn.laddr.ip}:{conn.laddr.port}"
    return None


def held_reason(peer: str | None) -> str:
    """The words stored in ``devices.held_outside`` and shown as a job's wait reason."""
    return f"{HELD_PREFIX} from {peer or 'another host'}"


class HeldWatch:
    """Marks phones held outside farm, and clears them, from each sweep's tracker summary.

    Args:
        store: the queue (``Store.mark_held_outside``).
        clock: monotonic time for the two sightings, wall time for the events.
        on_free: called when a phone is no longer held (farmd wakes its dispatcher).
        peers: finds the client of a server in use (:func:`session_peer`).
    """

    def __init__(self, store: Store, clock: Clock,
                 on_free: Callable[[], None] | None = None,
                 peers: Callable[[ServerInfo], str | None] = session_peer) -> None:
        self.store = store
        self.clock = clock
        self.on_free = on_free
        self.peers = peers
        # Whether farm's pool gate runs a session on a phone (farm.fleet.pool sets
        # and clears its held mark itself; the tracker's summary cannot show it).
        self.pooled: Callable[[str], bool] = lambda _serial: False
        self._seen_s: dict[str, float] = {}  # serial -> first sighting of this streak
        self._lock = threading.Lock()

    def update(self, devices: Iterable[DeviceRecord], keys: Mapping[str, str],
               summary: TrackerSummary | None, probing: Callable[[str], bool]) -> set[str]:
        """Judge every phone against one summary; returns the serials held outside now.

        Args:
            devices: the phones as just read from the store.
            keys: tracker key of each serial.
            summary: the tracker's summary; None (no answer) changes nothing.
            probing: whether farm's own session probe runs on a phone.
        """
        if summary is None:
            return {d.serial for d in devices if d.held_outside is not None}
        in_use = held_servers(summary)
        held: set[str] = set()
        with self._lock:
            for device in devices:
                server = in_use.get(keys.get(device.serial, ""))
                if self._judge(device, server, probing(device.serial)):
                    held.add(device.serial)
        return held

    def _judge(self, device: DeviceRecord, server: ServerInfo | None, probing: bool) -> bool:
        serial = device.serial
        if device.held_outside is not None and self.pooled(serial):
            return True  # a pool session: the pool clears the mark when it ends
        ours = device.attempt_id is not None or device.state is DeviceState.BUSY or probing
        if server is None or ours or device.state is not DeviceState.READY:
            # Only an idle ready phone can be someone else's: a server that took
            # a ticket and never serves (a frozen app) is the ladder's business.
            self._seen_s.pop(serial, None)
            if device.held_outside is not None and not ours:
                self._clear(device)
            return False
        if device.held_outside is not None:
            return True
        now_s = self.clock.monotonic()
        first_s = self._seen_s.setdefault(serial, now_s)
        if now_s - first_s < HELD_CONFIRM_S:
            return False
        peer = self.peers(server)
        if peer is None and is_loopback(server.host):
            # A usb-only phone is reached only through this host's adb forward:
            # no client connected to it means no session, whatever took the ticket.
            return False
        reason = held_reason(peer)
        if self.store.mark_held_outside(serial, reason, self.clock.now(), expect_held=None,
                                        expect_attempt=None):
            log.info("phone_held_outside", serial=serial, tracker_key=server.key, reason=reason)
            return True
        return False

    def _clear(self, device: DeviceRecord) -> None:
        if self.store.mark_held_outside(device.serial, None, self.clock.now(),
                                        expect_held=device.held_outside,
                                        expect_attempt=device.attempt_id):
            log.info("phone_no_longer_held_outside", serial=device.serial,
                     reason=device.held_outside)
            if self.on_free is not None:
                self.on_free()
