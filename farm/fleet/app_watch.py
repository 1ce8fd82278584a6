"""Noticing the TVM RPC app's death when it happens: a ``logcat -b events`` follower per phone.

When an app process dies, ActivityManager writes ``am_proc_died`` (and, for an
uncaught exception, ``am_crash`` just before) to the events buffer
(:mod:`farm.device.eventlog`). farmd keeps one ``logcat -b events -T <now> -s
am_proc_died am_crash`` open per ready phone and, on the death of one of the
app's processes, starts the recovery ladder's next step at once instead of at
the next health sweep (30 s by default). The sweep stays as the safety net:
it still notices a dead app the watcher missed (the watcher was restarting,
or the app froze without dying).

A watcher starts when a phone becomes ready and at every sweep for every
phone the sweep watches (one that is missing is started again). It ends when
its phone leaves adb (offline, rebooting: the phone is provisioned again and a
new watcher starts then), when the phone is quarantined, and when farmd
stops. A stream that ends while the phone is still watched is restarted after
farm's backoff (:func:`farm.backoff.backoff_s` with the ``[supervise]`` base
and cap), counting only the restarts that did not stay up for a while.

``-T <phone time>`` makes logcat print only what comes after the watcher
started (without it logcat prints the whole buffer first, old deaths
included); the time is the phone's own (``date +%s``), as the phone's clock
may differ from the host's.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from farm.adb import ShellStream
from farm.backoff import backoff_s
from farm.clock import wait_until
from farm.controllers import ANDROID
from farm.device.eventlog import DEATH_TAGS, AppDeath, parse_app_death
from farm.errors import FarmError, PhoneFault
from farm.fleet.lifecycle import WATCHED, Move
from farm.fleet.recovery import healable
from farm.provision.launch import PACKAGE
from farm.queue.models import DeviceState
from farm.supervise.ladder import Failure, incident_open

if TYPE_CHECKING:
    from farm.fleet.manager import FleetManager

__all__ = ["AppWatch", "events_argv"]

log = structlog.get_logger(__name__)

#: Deadline of each call that starts a watcher (``date``, then opening the stream).
START_TIMEOUT_S = 15.0
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


def events_argv(since_s: int) -> list[str]:
    """``logcat`` following the events buffer's app deaths logged from ``since_s`` on.

    Args:
        since_s: the phone's clock, epoch seconds (``date +%s``).
    """
    # -T takes a count when all digits, so the time carries its milliseconds.
    return ["logcat", "-b", "events", "-T", f"{since_s}.000", "-s", *DEATH_TAGS]


@dataclass
class _Watch:
    """One phone's watcher thread: its stream while open, and a wake-up for its waits."""

    stream: ShellStream | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    seen: collections.deque[tuple[str, str, int]] = field(
        default_factory=lambda: collections.deque(maxlen=_SEEN))


class AppWatch:
    """The fleet's app-death watchers, one thread per watched phone."""

    def __init__(self, manager: FleetManager) -> None:
        self.m = manager
        self._lock = threading.Lock()
        self._watches: dict[str, _Watch] = {}

    def ensure(self, serial: str) -> None:
        """Start ``serial``'s watcher unless it runs, watching is off or farmd closes.

        Only phones are watched: only the RPC app's deaths show in logcat.
        """
        if not self.m.options.watch_app_events or self.m.closing:
            return
        if self.m.runtime(serial).kind != ANDROID:
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
        stream = watch.stream
        if stream is not None:
            stream.close()

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
        """Open the phone's event stream and act on each death until the stream ends.

        Raises:
            PhoneFault: the phone's clock is unreadable, or adb failed to start the stream.
        """
        adb = self.m.adb
        now = adb.shell(serial, ["date", "+%s"], timeout_s=START_TIMEOUT_S, check=True).out
        if not now.strip().isdigit():
            raise PhoneFault(serial, f"date +%s printed {now.strip()[:40]!r}")
        stream = adb.stream(serial, events_argv(int(now)), timeout_s=START_TIMEOUT_S)
        watch.stream = stream
        if watch.stop.is_set():  # stopped while it opened
            stream.close()
        log.info("app_watch_started", serial=serial)
        try:
            for line in stream.lines():
                death = parse_app_death(line, PACKAGE)
                if death is None:
                    continue
                key = (death.tag, death.time, death.pid)
                if key in watch.seen:
                    continue
                watch.seen.append(key)
                try:
                    self.on_death(serial, death)
                except Exception:  # a bug: keep watching, say where
                    log.exception("app_death_handling_crashed", serial=serial)
        finally:
            watch.stream = None
            stream.close()

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
        if death.java_crash:
            self.m.note_crash(serial)
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
            return found is not None and len(found.servers_for(key)) < self.m.serving.sharing(key)

        if not wait_until(unlisted, UNLIST_DEADLINE_S, interval_s=UNLIST_POLL_S):
            log.warning("dead_app_still_listed", serial=serial, tracker_key=key,
                        waited_s=UNLIST_DEADLINE_S)
        self.m.recoverer.recover(serial)
