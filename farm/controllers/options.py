"""How farmd runs its phones: :class:`FleetOptions`, built from the config alone.

Every default lives in :mod:`farm.config`; this module only gathers the
settings the fleet reads, so the daemon and the test harness cannot drift apart
(they did: a copy of the probe timeout said 30 s here and 20 s in the config).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from farm.config import Settings
from farm.health.verdict import Limits
from farm.provision.policy import ClashPolicy
from farm.supervise.ladder import LadderPolicy

__all__ = ["FleetOptions"]


@dataclass(frozen=True)
class FleetOptions:
    """How farmd runs its phones; build it with :meth:`from_settings`.

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
        watch_app_events: follow each ready phone's app deaths in ``logcat -b
            events`` and recover at once (:mod:`farm.fleet.app_watch`).
        host_id: this farmd's host (``Settings.host_id``): the fleet runs only
            the phones this host owns (:mod:`farm.queue.hosts`).
        dead_after_s: a host silent this long is dead; its phones may be
            taken over when this host's adb server sees them.
    """

    tracker: tuple[str, int]
    key_prefix: str
    network: str
    phone_host: str | None
    device_tracker_port: int
    apk: Path | None
    clash: ClashPolicy
    limits: Limits
    ladder: LadderPolicy
    registration_deadline_s: float
    probe_every_sweeps: int
    probe_timeout_s: float
    watch_app_events: bool
    host_id: str
    dead_after_s: float

    @classmethod
    def from_settings(cls, settings: Settings, *, apk: Path | None = None) -> FleetOptions:
        """The options ``settings`` describe.

        Args:
            settings: farm's settings.
            apk: the APK to install instead of ``settings.apk.path`` (farmd's
                virtual phones use a stand-in when none is configured).

        Raises:
            ConfigError: a health limit or ladder value is out of range.
        """
        t = settings.tracker
        path = apk if apk is not None else settings.apk.path
        return cls(
            tracker=(t.host, t.port),
            key_prefix=t.key,
            network=t.network,
            phone_host=t.phone_host,
            device_tracker_port=t.device_port or t.port,
            apk=Path(path).expanduser() if path is not None else None,
            clash=ClashPolicy(settings.apk.on_signature_clash),
            limits=Limits.of(settings),
            ladder=LadderPolicy.from_settings(settings.supervise),
            registration_deadline_s=settings.supervise.registration_deadline_s,
            probe_every_sweeps=settings.health.probe_every_sweeps,
            probe_timeout_s=settings.health.probe_timeout_s,
            watch_app_events=settings.health.watch_app_events,
            host_id=settings.host_id,
            dead_after_s=settings.hosts.dead_after_s,
        )
