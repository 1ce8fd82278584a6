"""Noticing the RPC app's death when it happens: one event follower per watched device.

A kind whose controller reports its app's deaths
(:class:`~farm.controllers.capabilities.AppEventSource`: a phone's
``logcat -b events``, :mod:`farm.controllers.android_events`) gets one
follower per ready device; on the death of one of the app's processes farmd
starts the recovery ladder's next step at once instead of at the next health
sweep (30 s by default). The sweep stays as the safety net: it still notices a
dead app the watcher missed (the watcher was restarting, or the app froze
without dying). This module decides; the controller does the I/O.

A watcher starts when a phone becomes ready and at every sweep for every
phone the sweep watches (one that is missing is started again). It ends when
its phone leaves adb (offline, rebooting: the phone is provisioned again and a
new watcher starts then), when the phone is quarantined, and when farmd
stops. A stream that ends while the phone is still watched is restarted after
farm's backoff (:func:`farm.backoff.backoff_s` with the ``[supervise]`` base
and cap), counting only the restarts that did not stay up for a while.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import structlog

from farm.backoff import backoff_s
from farm.clock import wait_until
from farm.controllers.capabilities import AppEvents, AppEventSource
from farm.device.eventlog import AppDeath
from farm.errors import FarmError, PhoneFault
from farm.fleet.lifecycle import WATCHED, Move
from farm.fleet.ports import DeviceBook
from farm.fleet.recovery import healable
from farm.queue.models import DeviceState
from farm.supervise.ladder import Failure, incident_open

if TYPE_CHECKING:
    from farm.tvm.tracker import TrackerSummary

__all__ = ["AppWatch", "WatchedFleet"]

log = structlog.get_logger(__name__)

#: A stream that stayed up this long ended for a fresh reason: its restart waits
#: from the backoff's start again.
STABLE_S = 60.0
#: How long a death's recovery waits for the tracker to drop the dead app's key,
#: and how often it asks (the tracker drops it when the app's connection closes).
UNLIST_DEADLINE_S = 10.0
UNLIST_POLL_S = 0.1
#: Deaths remembered per phone, so a line seen again after a restart (same
#: second) is not a second death.
_SEEN = 32
#: States in which a phone's watcher keeps running (busy: a job's session ends
#: with the app's death too; the watcher stays for when the phone is released).
_KEEP = WATCHED | {DeviceState.BUSY}
#: States a death moves to unhealthy, so no job is dispatched to a dead app.
_TAKE_OUT = frozenset({DeviceState.READY, DeviceState.COOLING})


class WatchedFleet(DeviceBook, Protocol):
    """What the app watch reads and asks of the fleet beyond its bookkeeping."""

    @property
    def closing(self) -> bool:
        """Whether farmd stops (no watcher starts or restarts)."""
        ...

    def state(self, serial: str) -> DeviceState | None:
        """The device's stored state."""
        ...

    def start_task(self, label: str, fn: Callable[[], None]) -> None:
        """Run ``fn`` on a thread of its own."""
        ...

    def submit(self, serial: str, task: Callable[[str], None]) -> bool:
        """Run ``task(serial)`` unless a slow task runs for the device."""
        ...

    def tracker_summary(self, max_age_s: float = 0.0,
                        quiet: bool = False) -> TrackerSummary | None:
        """The tracker's summary, or None."""
        ...


@dataclass
class _Watch:
    """One phone's watcher thread: its stream while open, and a wake-up for its waits."""

    events: AppEvents | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    seen: collections.deque[tuple[str, str, int]] = field(
        default_factory=lambda: collections.deque(maxlen=_SEEN))


class AppWatch:
    """The fleet's app-death watchers, one thread per watched device.

    Args:
        fleet: the fleet's devices, store and tasks.
        recover: climbs the recovery ladder for a device (the fleet's recoverer).
        sharing: how many devices serve a tracker key now (:meth:`Serving.sharing
            <farm.fleet.serving.Serving.sharing>`).
    """

    def __init__(self, fleet: WatchedFleet, recover: Callable[[str], None],
                 sharing: Callable[[str], int]) -> None:
        self.m = fleet
        self._recover = recover
        self._sharing = sharing
        self._lock = threading.Lock()
        self._watches: dict[str, _Watch] = {}

    def ensure(self, serial: str) -> None:
        """Start ``serial``'s watcher unless it runs, watching is off or farmd closes.

        Only devices whose controller reports app deaths are watched.
        """
        if not self.m.options.watch_app_events or self.m.closing:
            return
        if not isinstance(self._source(serial), AppEventSource):
            return
        with self._lock:
            if serial in self._watches:
                return
            watch = self._watches[serial] = _Watch()
        self.m.start_task(f"app-watch-{serial}", lambda: self._run(serial, watch))

    def running(self, serial: str) -> bool:
        """Whether ``serial`` has a watcher thread."""
        with self._lock:
            return serial in self._watches

    def stop(self, serial: str) -> None:
        """End ``serial``'s watcher (its phone left adb); it is not restarted."""
        with self._lock:
            watch = self._watches.get(serial)
        if watch is not None:
            self._end(watch)

    def close(self) -> None:
        """End every watcher (farmd stops)."""
        with self._lock:
            watches = list(self._watches.values())
        for watch in watches:
            self._end(watch)

    @staticmethod
    def _end(watch: _Watch) -> None:
        watch.stop.set()
        events = watch.events
        if events is not None:
            events.close()

    def _source(self, serial: str) -> AppEventSource | None:
        """The device's controller if it reports app deaths (None: unknown kind, or it does not)."""
        try:
            controller = self.m.controller(serial)
        except PhoneFault:  # a kind this farmd does not run
            return None
        return controller if isinstance(controller, AppEventSource) else None

    # -- the watcher thread ------------------------------------------------------------

    def _wanted(self, serial: str, watch: _Watch) -> bool:
        if watch.stop.is_set() or self.m.closing:
            return False
        return self.m.state(serial) in _KEEP

    def _run(self, serial: str, watch: _Watch) -> None:
        """Follow the phone's events until it is no longer watched; restart what ends."""
        failures = 0
        try:
            while self._wanted(serial, watch):
                started = self.m.clock.monotonic()
                try:
                    self._follow(serial, watch)
                    reason = "stream ended"
                except FarmError as exc:
                    reason = str(exc)
                if not self._wanted(serial, watch):
                    break
                stable = self.m.clock.monotonic() - started >= STABLE_S
                failures = 0 if stable else failures + 1
                policy = self.m.options.ladder
                wait_s = backoff_s(failures, policy.backoff_base_s, policy.backoff_max_s)
                log.info("app_watch_restarting", serial=serial, reason=reason, wait_s=wait_s)
                if watch.stop.wait(wait_s):
                    break
        finally:
            with self._lock:
                if self._watches.get(serial) is watch:
                    del self._watches[serial]
            log.info("app_watch_ended", serial=serial)

    def _follow(self, serial: str, watch: _Watch) -> None:
        """Open the device's event follower and act on each death until it ends.

        Raises:
            PhoneFault: the device's clock is unreadable, or the follower did not start.
        """
        source = self._source(serial)
        if source is None:
            raise PhoneFault(serial, "its controller reports no app events")
        events = source.open_app_events(serial)
        watch.events = events
        if watch.stop.is_set():  # stopped while it opened
            events.close()
        log.info("app_watch_started", serial=serial)
        try:
            for death in events.deaths():
                key = (death.tag, death.time, death.pid)
                if key in watch.seen:
                    continue
                watch.seen.append(key)
                try:
                    self.on_death(serial, death)
                except Exception:  # a bug: keep watching, say where
                    log.exception("app_death_handling_crashed", serial=serial)
        finally:
            watch.events = None
            events.close()

    # -- acting on a death ---------------------------------------------------------------

    def on_death(self, serial: str, death: AppDeath) -> None:
        """Start recovery for a phone whose app just died, unless it is not farm's to heal now.

        A busy phone is left alone (its attempt fails by itself and the phone is
        released) unless its hold asks it to serve a key (a tuning attempt waits
        for it: :func:`~farm.fleet.recovery.healable`); so is one being
        provisioned, offline or quarantined. Else the
        death opens an incident in the ladder's history (unless one is open),
        takes the phone out of ready, and the ladder's next step runs at once on
        the phone's task thread (its backoff still applies).
        """
        log.info("app_died", serial=serial, tag=death.tag, pid=death.pid,
                 process=death.process, exception=death.exception)
        if death.java_crash and (source := self._source(serial)) is not None:
            source.note_crash(serial)  # not news for the next sweep's logcat
        if self.m.runtime(serial).blocked is not None:
            return
        record = self.m.store.get_device(serial)
        if record is None or not healable(record):
            log.info("app_death_left", serial=serial, state=record and record.state.value)
            return
        now = self.m.clock.now()
        if not incident_open(self.m.history(serial), now):
            self.m.record(serial, Failure(now, death.reason))
        self.m.settle(serial, lambda r: Move(DeviceState.UNHEALTHY, f"app died: {death.reason}")
                      if r.state in _TAKE_OUT else None)
        self.m.submit(serial, self.recover_unlisted)

    def recover_unlisted(self, serial: str) -> None:
        """Wait (bounded) until the tracker drops the dead app's key, then climb the ladder.

        The ladder's step checks that the app registered again by looking for
        its key at the tracker. Right after the death the tracker may still
        list the dead app (its connection has not closed yet, through the
        usb-only relay too), and the step would pass at once while the app is
        down: measured, the step was "ok" 0.3 s after the crash and the next
        sweep restarted the app a second time.
        """
        key = self.m.runtime(serial).key

        def unlisted() -> bool:  # a shared (job) key: fewer servers than devices serving it
            found = self.m.tracker_summary(quiet=True)
            return found is not None and len(found.servers_for(key)) < self._sharing(key)

        if not wait_until(unlisted, UNLIST_DEADLINE_S, interval_s=UNLIST_POLL_S):
            log.warning("dead_app_still_listed", serial=serial, tracker_key=key,
                        waited_s=UNLIST_DEADLINE_S)
        self._recover(serial)
