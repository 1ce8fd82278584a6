"""The settings of Android phones: the adb server, the RPC app, health, recovery, virtual phones."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from farm.config.base import Frozen, host_port


class AdbSettings(Frozen):
    """The adb server farm uses (one per host) and the phones it connects over TCP.

    Attributes:
        port: the loopback adb server's port (5037 is adb's default).
        binary: the adb executable; None means the one adbutils ships.
        connect: ``host:port`` of adb-over-TCP phones to ``adb connect`` and keep connected.
    """

    port: int = Field(5037, gt=0, lt=65536)
    binary: Path | None = None
    connect: tuple[str, ...] = ()

    @field_validator("connect")
    @classmethod
    def _check_connect(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(host_port(item) for item in value)


class ApkSettings(Frozen):
    """The TVM RPC app to install.

    Attributes:
        path: the signed APK (``python -m apk_tools sign`` signs one); None
            means provisioning installs nothing.
        on_signature_clash: what to do when the phone has the app signed by
            another key: ``fail`` (default) or ``uninstall``, which **wipes
            the app's data** and is therefore never implied.
    """

    path: Path | None = None
    on_signature_clash: Literal["fail", "uninstall"] = "fail"


class HealthSettings(Frozen):
    """Health sweep cadence and the limits a ready phone must meet.

    ``probe_every_sweeps``: every Nth sweep opens a real RPC session to each
    idle ready phone (the tracker keeps listing frozen apps); 0 never.
    ``probe_timeout_s`` bounds one such probe, TVM's import included.
    ``watch_app_events``: follow each ready phone's ``logcat -b events`` and
    restart the app as soon as it dies (``am_proc_died``/``am_crash``) instead
    of at the next sweep; false leaves app deaths to the sweep.
    ``held_interval_s``: how often farmd reads the tracker's summary between
    sweeps to see a person's own session on a phone (:mod:`farm.fleet.held`):
    one small tracker request, so a hand session is seen as held outside
    within about two of these, before a job is sent onto the phone (at the
    sweep's 30 s it took up to a minute and jobs went there meanwhile, issue 26).
    """

    interval_s: float = Field(30.0, gt=0)
    held_interval_s: float = Field(1.0, gt=0)
    probe_every_sweeps: int = Field(4, ge=0)
    probe_timeout_s: float = Field(20.0, gt=0)
    watch_app_events: bool = True
    battery_temp_max_c: float = 35.0
    thermal_status_max: int = Field(0, ge=0, le=6)
    zone_temp_max_c: float = 70.0
    battery_min_pct: float = Field(20.0, ge=0, le=100)
    storage_min_free_mb: int = Field(500, ge=0)
    require_screen_on: bool = True
    cool_margin_c: float = Field(2.0, ge=0)
    require_plugged: bool = False
    #: Thresholds of declared readings with no setting of their own, by name
    #: (``[health.reading_limits] load_1m = 4.0``; :mod:`farm.health.readings`).
    reading_limits: dict[str, float] = Field(default_factory=dict)


class SuperviseSettings(Frozen):
    """The recovery ladder: exponential backoff and quarantine."""

    backoff_base_s: float = Field(2.0, gt=0)
    backoff_max_s: float = Field(300.0, gt=0)
    quarantine_after: int = Field(5, ge=1)
    quarantine_window_s: float = Field(3600.0, gt=0)
    #: An app that crashes again this soon after a relaunch healed it is in a
    #: crash loop: only such incidents, and those the first relaunch did not
    #: heal, count toward quarantine (farm.supervise.ladder).
    crash_loop_s: float = Field(60.0, ge=0)
    registration_deadline_s: float = Field(60.0, gt=0)

    @model_validator(mode="after")
    def _base_below_max(self) -> SuperviseSettings:
        if self.backoff_base_s > self.backoff_max_s:
            raise ValueError("backoff_base_s must not exceed backoff_max_s")
        return self


class VirtualSettings(Frozen):
    """Virtual phones farmd starts for a demo (``farmd --virtual-phones N`` overrides count).

    Attributes:
        count: how many phones.
        network: how the phones reach the host. Unset in a :class:`Settings`,
            it follows ``tracker.network``, so the phones fit the way farmd
            reaches them (lan phones under a usb-only farmd bind 5001, 5002,
            ... and get tunnels they do not need; usb-only phones under a lan
            farmd never reach the tracker).
        same_model: every phone of one model (``farmd --same-model``): a tuning
            job over ``phones = 2`` needs two phones of one model, and the
            default fleet cycles through four models.
    """

    count: int = Field(0, ge=0)
    network: Literal["lan", "usb-only"] = "usb-only"
    same_model: bool = False
