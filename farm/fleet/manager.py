"""The fleet manager: acts on adb events and health sweeps, one phone at a time.

Decisions are pure and live elsewhere: lifecycle moves in
:mod:`farm.fleet.lifecycle`, health in :mod:`farm.health.verdict`, recovery in
:mod:`farm.supervise.ladder`, the install policy in :mod:`farm.provision.policy`.
This module gathers observations, asks those functions, and applies the
answers through adb and the store. Slow work (provisioning, recovery) runs on
a thread pool, at most one task per phone at a time.
"""

from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import structlog

from farm.adb import Adb
from farm.aio import LoopThread
from farm.clock import Clock
from farm.errors import ConfigError, FarmError, InfraFault, NoFreeServer, PhoneFault, UserFault
from farm.fleet import lifecycle
from farm.fleet.keys import phone_key
from farm.fleet.phone import PhoneRuntime
from farm.fleet.recovery import Recoverer
from farm.health.probes import read_health
from farm.health.sample import HealthSample
from farm.health.verdict import Limits, app_down, app_failure_reasons, cool_enough, verdict
from farm.metrics import FarmMetrics
from farm.provision.apk import ensure_installed, installed_version
from farm.provision.app_target import app_target_for, detect_method
from farm.provision.facts import facts_record, read_facts
from farm.provision.launch import PACKAGE, launch_app
from farm.provision.policy import ClashPolicy
from farm.provision.tunnels import close_usb_tunnel, open_usb_tunnel
from farm.queue.models import DeviceState
from farm.queue.store import Store
from farm.supervise.ladder import Failure, LadderPolicy, quarantined
from farm.tvm.probe import probe_session
from farm.tvm.tracker import summary

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class FleetOptions:
    """How farmd runs its phones (built from :class:`farm.config.Settings`).

    Attributes:
        tracker: where farmd reaches the tracker, ``(host, port)``.
        key_prefix: tracker keys are ``<prefix>-<serial>``.
        network: ``usb-only`` (adb tunnels and a relay per phone; works on any
            network) or ``lan`` (phones reach ``phone_host`` directly).
        phone_host: the host's address as lan phones reach it.
        device_tracker_port: the tracker's port on usb-only phones (reversed).
        apk: the signed TVM RPC APK to install, or None to use what is installed.
        clash: what to do when another key signed the installed app.
        limits: health limits.
        ladder: recovery ladder policy.
        registration_deadline_s: how long the app may take to register.
        probe_every_sweeps: every Nth sweep opens a real RPC session to each
            idle ready phone, because the tracker keeps listing a server that
            froze or vanished without closing its socket (0: never).
        probe_timeout_s: hard deadline of one probe (TVM's import included).
    """

    tracker: tuple[str, int]
    key_prefix: str = "android"
    network: str = "usb-only"
    phone_host: str | None = None
    device_tracker_port: int = 9190
    apk: Path | None = None
    clash: ClashPolicy = ClashPolicy.FAIL
    limits: Limits = Limits()
    ladder: LadderPolicy = LadderPolicy()
    registration_deadline_s: float = 60.0
    probe_every_sweeps: int = 4
    probe_timeout_s: float = 30.0


class FleetManager:
    """Keeps every phone provisioned, watched and healed.

    Thread-safe: ``on_adb_state`` is called from the device tracker's thread,
    ``sweep`` from the scheduler's.
    """

    def __init__(
        self, options: FleetOptions, adb: Adb, store: Store, clock: Clock, loop: LoopThread,
        *, max_workers: int = 8,
    ) -> None:
        self.options = options
        self.adb = adb
        self.store = store
        self.clock = clock
        self.loop = loop
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers, "farm-fleet")
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.phones: dict[str, PhoneRuntime] = {}
        self._sweeps = 0
        self.recoverer = Recoverer(self)
        self.metrics: FarmMetrics | None = None  # farmd sets it; tests may leave it unset

    # -- bookkeeping ---------------------------------------------------------------

    def runtime(self, serial: str) -> PhoneRuntime:
        """The phone's in-memory state, created on first use."""
        with self._lock:
            phone = self.phones.get(serial)
            if phone is None:
                phone = PhoneRuntime(serial, phone_key(self.options.key_prefix, serial))
                self.phones[serial] = phone
            return phone

    def state(self, serial: str) -> DeviceState | None:
        record = self.store.get_device(serial)
        return record.state if record else None

    def move(self, serial: str, to_state: DeviceState, reason: str) -> bool:
        """Apply a transition (idempotent); logs it when something changed."""
        from_state = self.state(serial)
        changed = self.store.set_device_state(serial, to_state, reason, self.clock.now())
        if changed:
            log.info("phone_state_changed", serial=serial, from_state=from_state and from_state.value,
                     to_state=to_state.value, reason=reason)
        return bool(changed)

    def submit(self, serial: str, task, *args) -> bool:  # type: ignore[no-untyped-def]
        """Run ``task(serial, *args)`` on the pool unless one already runs for it or we close."""
        phone = self.runtime(serial)
        with self._lock:
            if phone.busy_task or self._closing.is_set():
                return False
            phone.busy_task = True

        def run() -> None:
            try:
                task(serial, *args)
            except _Closing:
                pass  # farmd stops: no verdict on the phone
            except Exception:  # a bug: keep the manager alive, say where
                log.exception("fleet_task_crashed", serial=serial, task=task.__name__)
            finally:
                phone.busy_task = False

        self._pool.submit(run)
        return True

    # -- events -------------------------------------------------------------------------

    def on_adb_state(self, serial: str, adb_state: str) -> None:
        """A settled adb state change from :class:`farm.adb.DeviceTracker`."""
        now = self.clock.now()
        prior = self.state(serial)  # None for a phone never seen: decide before the row exists
        move = lifecycle.on_adb_state(prior, adb_state)
        self.store.upsert_device(serial, now)
        if move is None:
            return
        self.move(serial, move.to_state, move.reason)
        if move.to_state is DeviceState.OFFLINE:
            self._drop_tunnel(serial)
        elif move.to_state is DeviceState.DISCOVERED:
            self.submit(serial, self.provision)

    def forget_connections(self, reason: str) -> None:
        """Mark every phone offline: at farmd start nothing of an earlier run
        (tunnels, relays, app launched toward an old tracker) can be trusted.
        Quarantine is kept. The device tracker then rediscovers each phone."""
        for device in self.store.list_devices():
            if device.state not in (DeviceState.QUARANTINED, DeviceState.OFFLINE):
                self.move(device.serial, DeviceState.OFFLINE, reason)

    def _drop_tunnel(self, serial: str) -> None:
        phone = self.runtime(serial)
        tunnel, phone.tunnel = phone.tunnel, None
        if tunnel is not None:
            close_usb_tunnel(self.adb, self.loop, tunnel)

    # -- provisioning -------------------------------------------------------------------

    def provision(self, serial: str) -> None:
        """discovered -> provisioning -> ready (or unhealthy, with the reason)."""
        phone = self.runtime(serial)
        self.move(serial, DeviceState.PROVISIONING, "provisioning")
        try:
            facts = read_facts(self.adb, serial)
            self.store.upsert_device(serial, self.clock.now(), facts=facts_record(facts))
            if self.options.apk is not None:
                ensure_installed(self.adb, serial, self.options.apk, self.options.clash)
            elif installed_version(self.adb, serial, PACKAGE) is None:
                raise ConfigError("apk.path", f"{PACKAGE} is not installed on {serial} and no "
                                  "APK is configured: set apk.path to the signed TVM RPC APK")
            # Asked of the phone once the app is in place: a preinstalled release
            # build refuses run-as, and only the phone knows whether su works.
            phone.method = detect_method(self.adb, serial)
            phone.blocked = None
            # Keep the screen on while plugged in (AOSP `svc power stayon`).
            self.adb.shell(serial, ["svc", "power", "stayon", "true"], timeout_s=15)
            self.launch(serial)
        except UserFault as exc:
            phone.blocked = str(exc)
            log.error("provisioning_blocked", serial=serial, reason=str(exc))
            self.move(serial, DeviceState.UNHEALTHY, f"provisioning failed: {exc}")
            return
        except PhoneFault as exc:
            log.warning("provisioning_failed", serial=serial, reason=str(exc))
            phone.history.append(Failure(self.clock.now(), f"provisioning: {exc}"))
            self.move(serial, DeviceState.UNHEALTHY, f"provisioning failed: {exc}")
            return
        self.move(serial, DeviceState.READY, "app registered at the tracker")

    def launch(self, serial: str) -> None:
        """(Re)open tunnels, launch the app toward the tracker, wait for registration.

        Raises:
            PhoneFault: a step failed, or the app did not register in time.
        """
        phone = self.runtime(serial)
        if self.options.network == "usb-only":
            self._drop_tunnel(serial)
            phone.tunnel = open_usb_tunnel(self.adb, self.loop, serial, self.options.tracker,
                                           self.options.device_tracker_port)
        o = self.options
        target = app_target_for(o.network, o.tracker, phone.key, phone_host=o.phone_host,
                                device_tracker_port=o.device_tracker_port)
        if phone.method is None:  # relaunched before provisioning learnt it
            phone.method = detect_method(self.adb, serial)
        launch_app(self.adb, serial, target, phone.method)
        self.wait_registered(serial)

    def registered_keys(self) -> set[str] | None:
        """Keys the tracker lists now, or None if it does not answer."""
        try:
            return {s.key for s in summary(*self.options.tracker, timeout_s=5).servers}
        except FarmError as exc:
            log.warning("tracker_summary_failed", reason=str(exc))
            return None

    def wait_registered(self, serial: str) -> None:
        """Block until the phone's key is at the tracker.

        Raises:
            PhoneFault: not within ``registration_deadline_s``.
        """
        key = self.runtime(serial).key
        deadline = self.clock.monotonic() + self.options.registration_deadline_s
        while self.clock.monotonic() < deadline:
            keys = self.registered_keys()
            if keys is not None and key in keys:
                log.info("app_registered", serial=serial, tracker_key=key)
                return
            if self._closing.wait(0.5):
                raise _Closing(serial)
        raise PhoneFault(serial, f"app did not register as {key!r} within "
                                 f"{self.options.registration_deadline_s:g} s")

    # -- health --------------------------------------------------------------------------

    def sweep(self) -> int:
        """Probe every watched phone in parallel and act on the verdicts; returns how many."""
        devices = self.store.list_devices()
        for device in devices:
            if device.state is DeviceState.DISCOVERED:
                # Released from quarantine by farmctl, or a provisioning that
                # never started (a replug, a reboot rung): (re)provision it. Only
                # a release forgets the history: a phone that keeps failing across
                # reboots and replugs must still reach quarantine.
                phone = self.runtime(device.serial)
                if quarantined(phone.history):
                    self.recoverer.released(device.serial)
                self.submit(device.serial, self.provision)
        watched = [d.serial for d in devices
                   if d.state in lifecycle.WATCHED or d.state is DeviceState.BUSY]
        keys = self.registered_keys()
        self._sweeps += 1
        every = self.options.probe_every_sweeps
        probe = bool(every) and self._sweeps % every == 0
        futures = [self._pool.submit(self._sweep_one, serial, keys, probe) for serial in watched]
        concurrent.futures.wait(futures, timeout=60)
        return len(watched)

    def _sweep_one(self, serial: str, keys: set[str] | None, probe: bool = False) -> None:
        """Read, store and act on one phone's health; start its session probe if due.

        The probe runs as its own task, after the reading shows the app up and
        registered: a frozen app holds a probe for its whole timeout, and that
        must not hold the sweep (and so every other phone's next sweep) too.
        """
        phone = self.runtime(serial)
        now = self.clock.now()
        registered = None if keys is None else phone.key in keys
        try:
            sample, phone.crashes_seen = read_health(
                self.adb, serial, now, crashes_seen=phone.crashes_seen, registered=registered)
        except PhoneFault as exc:
            log.warning("health_probe_failed", serial=serial, reason=str(exc))
            return
        if self.metrics is not None:
            self.metrics.observe_health(sample)
        self.store.record_health(serial, now, {
            "battery_pct": sample.battery_pct, "battery_temp_c": sample.battery_temp_c,
            "thermal_status": sample.thermal_status, "max_zone_temp_c": sample.max_zone_temp_c,
            "free_storage_mb": sample.free_storage_mb, "screen_on": sample.screen_on,
            "app_running": sample.app_running, "registered": sample.registered,
        })
        self._judge(serial, sample)
        if probe and sample.app_running and sample.registered:
            self._start_probe(serial, sample)

    def _start_probe(self, serial: str, sample: HealthSample) -> None:
        """Submit a session probe of a ready phone unless one already runs for it."""
        phone = self.runtime(serial)
        if self.state(serial) is not DeviceState.READY:
            return
        with self._lock:
            if phone.probing:
                return
            phone.probing = True

        def run() -> None:
            try:
                # Judge only a phone still ready: one claimed, unplugged or being
                # recovered while the probe ran failed it for that reason.
                if (self._probe(serial) is False and not self._closing.is_set()
                        and self.state(serial) is DeviceState.READY):
                    self._judge(serial, replace(sample, at=self.clock.now(), probe_ok=False))
            except Exception:  # a bug: keep the manager alive, say where
                log.exception("fleet_task_crashed", serial=serial, task="probe")
            finally:
                phone.probing = False

        self._pool.submit(run)

    def _probe(self, serial: str) -> bool | None:
        """A tiny real session to the phone through the tracker (see FleetOptions).

        Returns:
            True when the session served, False when the phone failed it, None
            when that says nothing about the phone: the tracker is unreachable,
            or it gave no ticket (a job holds the session).
        """
        try:
            probe_session(*self.options.tracker, self.runtime(serial).key,
                          timeout_s=self.options.probe_timeout_s, serial=serial)
            return True
        except (InfraFault, NoFreeServer) as exc:
            log.warning("session_probe_skipped", serial=serial, reason=str(exc))
            return None
        except FarmError as exc:
            log.warning("session_probe_failed", serial=serial, reason=str(exc))
            return False

    def _judge(self, serial: str, sample: HealthSample) -> None:
        """Move the phone as the sample's verdict says; climb the ladder if its app is down."""
        phone = self.runtime(serial)
        state = self.state(serial)
        if state is None or phone.busy_task:
            return
        judged = verdict(sample, self.options.limits)
        move = lifecycle.on_verdict(state, judged,
                                    cool=cool_enough(sample, self.options.limits))
        if move is not None:
            self.move(serial, move.to_state, move.reason)
        if state is not DeviceState.BUSY and app_down(sample) and phone.blocked is None:
            phone.history.append(Failure(sample.at, "; ".join(app_failure_reasons(sample))))
            self.submit(serial, self.recoverer.recover)

    def relaunch_all(self, reason: str) -> None:
        """Relaunch the app on every ready or cooling phone (e.g. a new tracker)."""
        for device in self.store.list_devices():
            if device.state in (DeviceState.READY, DeviceState.COOLING, DeviceState.UNHEALTHY):
                log.info("app_relaunch", serial=device.serial, reason=reason)
                self.submit(device.serial, self._relaunch)

    def _relaunch(self, serial: str) -> None:
        try:
            self.launch(serial)
        except FarmError as exc:
            self.runtime(serial).history.append(Failure(self.clock.now(), str(exc)))
            self.move(serial, DeviceState.UNHEALTHY, f"relaunch failed: {exc}")

    def close(self) -> None:
        """Stop the pool and every tunnel."""
        self._closing.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for serial in list(self.phones):
            self._drop_tunnel(serial)


class _Closing(Exception):
    """The manager closes: a task stops waiting and records nothing about the phone."""
