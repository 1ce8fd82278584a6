"""A tuning job's phones serve the job's tracker key, and keep serving it, while it runs.

MetaSchedule's ``RPCRunner`` asks the tracker for *one* key and measures each
candidate on whichever server of that key is free, so every phone allocated to
a tuning job must serve the same key, and only they may (TVM's tracker matches
keys exactly: apache/tvm ``python/tvm/rpc/tracker.py``). The job key is
:func:`farm.tvm.keys.job_key`. :func:`serving_job_key` does three things
around the tuning::

    before   relaunch each phone's app under the job key and wait until the
             tracker lists one server per phone under it
    during   a monitor thread reads the tracker's summary every few seconds;
             when fewer servers than phones are listed, each phone whose
             ``:RPCProcess`` is gone (an app crash) is relaunched under the
             job key: the farm brings it back and tuning goes on (the
             candidates measured while it was down are recorded as failed
             runs and tuning runs further rounds, see farm.jobs.tune)
    after    (success or failure) relaunch every phone under its own
             ``phone_key``, so farmd's health sweep finds it registered

This runs in the attempt's child process, which does not share farmd's memory:
the app's configuration method is asked from the phone
(:func:`farm.provision.app_target.detect_method`) and the phone-side tracker
address comes from the settings (:func:`farm.provision.app_target.app_target`).
In ``usb-only`` mode the adb reverse tunnel and relay farmd opened for the phone
stay in place: only the key the app registers under changes.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import structlog

from farm.adb import Adb, AdbServer
from farm.config import Settings
from farm.errors import FarmError, PhoneFault
from farm.provision.app_target import app_target, detect_method
from farm.provision.launch import RPC_PROCESS, Method, launch_app
from farm.tvm.keys import job_key, phone_key
from farm.tvm.tracker import summary

__all__ = ["JobPhones", "serving_job_key"]

log = structlog.get_logger(__name__)

MONITOR_INTERVAL_S = 3.0
REGISTER_DEADLINE_S = 90.0
#: A relaunched app registers about 5 s later (MainActivity's
#: HANDLER_RESTART_DELAY); it is not relaunched again before this much time,
#: unless every app has registered since (then a vanished one crashed).
RELAUNCH_GRACE_S = 20.0
SUMMARY_TIMEOUT_S = 5.0
_POLL_S = 0.5


@dataclass
class _Phone:
    serial: str
    method: Method
    launched_s: float = 0.0


@dataclass
class JobPhones:
    """The phones of one tuning job and the key they serve.

    Create with :func:`serving_job_key`; the attributes are read after the job.

    Attributes:
        adb: the adb client.
        settings: farm's settings (tracker address, key prefix, network).
        key: the job's tracker key.
        relaunches: serials relaunched by the monitor, in order (one entry per
            relaunch after an app crash).
        on_relaunch: called with the serial after each such relaunch (the runner
            counts relaunches across attempts with it, farm.jobs.tune_progress).
    """

    adb: Adb
    settings: Settings
    key: str
    phones: list[_Phone] = field(default_factory=list)
    relaunches: list[str] = field(default_factory=list)
    on_relaunch: Callable[[str], None] | None = None
    interval_s: float = MONITOR_INTERVAL_S
    register_deadline_s: float = REGISTER_DEADLINE_S
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def serials(self) -> list[str]:
        """The job's phones."""
        return [p.serial for p in self.phones]

    # --- tracker ------------------------------------------------------------------------

    def listed(self, key: str) -> int:
        """Servers the tracker lists under ``key`` now.

        Raises:
            TrackerUnreachable: the tracker does not answer.
        """
        t = self.settings.tracker
        return len(summary(t.host, t.port, timeout_s=SUMMARY_TIMEOUT_S).servers_for(key))

    def wait_listed(self, key: str, count: int, deadline_s: float) -> None:
        """Block until the tracker lists ``count`` servers under ``key``.

        Raises:
            PhoneFault: not within ``deadline_s`` (names the job's phones).
            TrackerUnreachable: the tracker stopped answering at the deadline.
        """
        end_s = time.monotonic() + deadline_s
        seen = 0
        while True:
            with contextlib.suppress(FarmError):
                seen = self.listed(key)
            if seen >= count:
                return
            if time.monotonic() >= end_s:
                raise PhoneFault(",".join(self.serials),
                                 f"{seen} of {count} apps registered as {key!r} "
                                 f"within {deadline_s:g} s")
            time.sleep(_POLL_S)

    # --- the phones ------------------------------------------------------------------------

    def launch(self, phone: _Phone, key: str) -> None:
        """Relaunch ``phone``'s app toward the tracker under ``key``.

        Raises:
            AdbError, PhoneFault: a step failed on the phone or in adb.
        """
        launch_app(self.adb, phone.serial, app_target(self.settings, key), phone.method)
        phone.launched_s = time.monotonic()

    def rpc_running(self, serial: str) -> bool:
        """Whether the app's ``:RPCProcess`` runs on ``serial`` (``pidof``).

        Raises:
            PhoneFault: adb failed.
        """
        result = self.adb.shell(serial, ["pidof", RPC_PROCESS], timeout_s=15)
        return result.exit_code == 0 and bool(result.out.split())

    def check_once(self) -> list[str]:
        """One monitor pass: relaunch the phones whose RPC server vanished.

        Cheap when all is well (one tracker SUMMARY); adb is asked only when
        fewer servers than phones are listed.

        Returns:
            The serials relaunched in this pass.

        Raises:
            FarmError: the tracker or adb failed (the monitor logs and retries).
        """
        if self.listed(self.key) >= len(self.phones):
            for phone in self.phones:  # all registered: no launch is still starting
                phone.launched_s = 0.0
            return []
        now_s = time.monotonic()
        relaunched = []
        for phone in self.phones:
            if now_s - phone.launched_s < RELAUNCH_GRACE_S or self.rpc_running(phone.serial):
                continue
            log.warning("tuning_app_gone", serial=phone.serial, tracker_key=self.key)
            self.launch(phone, self.key)
            self.relaunches.append(phone.serial)
            if self.on_relaunch is not None:
                self.on_relaunch(phone.serial)
            relaunched.append(phone.serial)
            log.info("tuning_app_relaunched", serial=phone.serial, tracker_key=self.key,
                     relaunches=len(self.relaunches))
        return relaunched

    def _monitor(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check_once()
            except FarmError as exc:
                log.warning("tuning_monitor_failed", tracker_key=self.key, reason=str(exc))

    def start_monitor(self) -> None:
        """Run :meth:`check_once` every ``interval_s`` in a daemon thread until stopped."""
        self._stop.clear()
        # Run in a copy of this context, so the monitor's log lines carry the
        # job_id and attempt bound by the child (structlog contextvars).
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._monitor,),
                                        name="tuning-monitor", daemon=True)
        self._thread.start()

    def stop_monitor(self) -> None:
        """Stop the monitor thread and wait for it (at most one adb round)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def restore(self) -> list[str]:
        """Relaunch every phone under its own key and wait for each registration.

        Never raises: a phone that does not come back is left to farmd's health
        sweep and recovery ladder, and is logged here.

        Returns:
            The serials that did not register again in time.
        """
        prefix = self.settings.tracker.key
        failed = []
        for phone in self.phones:
            try:
                self.launch(phone, phone_key(prefix, phone.serial))
            except FarmError as exc:
                log.warning("tuning_app_not_restored", serial=phone.serial, reason=str(exc))
                failed.append(phone.serial)
        for phone in self.phones:
            if phone.serial in failed:
                continue
            key = phone_key(prefix, phone.serial)
            try:
                self.wait_listed(key, 1, self.register_deadline_s)
            except FarmError as exc:
                log.warning("tuning_app_not_restored", serial=phone.serial, reason=str(exc))
                failed.append(phone.serial)
        return failed


@contextlib.contextmanager
def serving_job_key(
    settings: Settings, serials: Sequence[str], job_id: int, *, adb: Adb | None = None,
    interval_s: float = MONITOR_INTERVAL_S, register_deadline_s: float = REGISTER_DEADLINE_S,
    on_relaunch: Callable[[str], None] | None = None,
) -> Iterator[JobPhones]:
    """Serve the job's key on ``serials`` for the block, healing app crashes.

    Args:
        settings: farm's settings.
        serials: the phones allocated to the job.
        job_id: the job; its key is ``job_key(settings.tracker.key, job_id)``.
        adb: the adb client; one for ``settings.adb`` by default.
        interval_s: seconds between monitor passes.
        register_deadline_s: how long the apps may take to register.
        on_relaunch: called with the serial after each relaunch of a crashed app.

    Yields:
        The job's phones; ``relaunches`` counts the monitor's relaunches.

    Raises:
        PhoneFault: a phone could not be relaunched, or the apps did not all
            register under the job key in time (the phones are restored first).
        AdbError: a launch step failed on a phone.
    """
    adb = adb or Adb(AdbServer(port=settings.adb.port, binary=settings.adb.binary))
    phones = JobPhones(adb, settings, job_key(settings.tracker.key, job_id),
                       on_relaunch=on_relaunch, interval_s=interval_s,
                       register_deadline_s=register_deadline_s)
    try:
        for serial in serials:
            phones.phones.append(_Phone(serial, detect_method(adb, serial)))
        for phone in phones.phones:
            phones.launch(phone, phones.key)
        phones.wait_listed(phones.key, len(phones.phones), register_deadline_s)
        log.info("tuning_phones_serving", tracker_key=phones.key, serials=phones.serials)
        phones.start_monitor()
        yield phones
    finally:
        phones.stop_monitor()
        not_back = phones.restore()
        log.info("tuning_phones_restored", tracker_key=phones.key, serials=phones.serials,
                 relaunches=len(phones.relaunches), not_restored=not_back)
