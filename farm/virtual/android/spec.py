"""What one virtual phone is: its hardware, build and behaviour constants.

A :class:`PhoneSpec` is frozen data; everything the phone prints that depends
on the device (``/proc/cpuinfo``, ``uname``, thermal zones, ``df``) is rendered
from it, and ``getprop`` is the model's real capture made this phone's (see
:mod:`farm.virtual.android.props`). :func:`profiles` cycles through a few
realistic phones whose values come from the real captures in ``fixtures/``
(see its README); a test checks each profile against its capture.

``cpu_abi`` is ``x86_64`` on every profile, as on the Android emulator: the
TVM RPC process of a virtual phone runs host code, so modules must be built for
the host's ABI. ``/proc/cpuinfo`` and ``uname -m`` follow it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from farm.virtual.contracts import NetworkMode

GpuKind = Literal["none", "mali", "adreno"]

# AOSP frameworks/base core/java/android/os/Temperature.java TYPE_* constants.
TYPE_CPU = 0
TYPE_GPU = 1
TYPE_BATTERY = 2
TYPE_SKIN = 3


@dataclass(frozen=True)
class ThermalSensor:
    """One temperature sensor, seen both by the thermal HAL and in sysfs.

    Attributes:
        name: HAL name (``Temperature{mName=...}``), e.g. ``"skin"``, ``"BAT"``.
        hal_type: ``Temperature.TYPE_*`` (0 CPU, 1 GPU, 2 BATTERY, 3 SKIN).
        zone_type: ``/sys/class/thermal/thermal_zoneN/type`` content.
        idle_offset_c: degrees above ambient when idle.
        load_rise_c: degrees above the idle level at full sustained load.
    """

    name: str
    hal_type: int
    zone_type: str
    idle_offset_c: float
    load_rise_c: float


@dataclass(frozen=True)
class PhoneSpec:
    """A phone model plus the per-instance knobs of one virtual phone.

    Attributes:
        serial_port: TCP port adbd listens on; the adb serial is ``127.0.0.1:PORT``
            (0 until the fleet assigns one).
        model, manufacturer, brand, device, product: ``ro.product.*``.
        soc_model: ``ro.soc.model``; soc_manufacturer: ``ro.soc.manufacturer``.
        board_platform: ``ro.board.platform``; hardware: ``ro.hardware``.
        sdk, release: ``ro.build.version.sdk`` / ``.release``.
        build_id, build_incremental: ``ro.build.id`` / ``ro.build.version.incremental``.
        build_type: ``user`` or ``userdebug`` (``ro.build.type``).
        cpu_abi: ``ro.product.cpu.abi``.
        core_max_freq_khz: per core ``cpuinfo_max_freq`` (kHz), little cores first.
        core_parts: per core ARM ``CPU part`` for ``/proc/cpuinfo``.
        mem_total_kb: ``MemTotal`` of ``/proc/meminfo``.
        storage_total_kb: size of ``/data`` in 1 KiB blocks.
        storage_used_kb: used on ``/data`` at first boot, in KiB.
        battery_capacity_mah: design capacity.
        sensors: thermal sensors in HAL order; sysfs zones use the same order.
        throttling_thresholds_c: hot thresholds (°C) of the hottest sensor for
            status LIGHT..SHUTDOWN (AOSP ``Temperature.THROTTLING_*`` 1..6).
        thermal_speed: fraction of its speed the phone keeps at each thermal
            status 0..6 (NONE..SHUTDOWN), as its governor caps the clocks:
            none at LIGHT ("UX not impacted", AOSP ``PowerManager``), then
            steeper from MODERATE on.
        gpu: GPU family, ``none`` when the phone has no OpenCL driver.
        network: ``lan`` or ``usb-only``.
        rooted: whether ``su`` exists.
        debuggable: ``ro.debuggable`` (userdebug builds).
        screen_w_px, screen_h_px, density_dpi: the display.
        ambient_c: room temperature the phone cools toward.
        heat_time_constant_s: first-order time constant of heating and cooling.
        battery_pct: charge at first boot.
        plugged: whether USB power is connected at first boot.
        idle_drain_pct_per_h, load_drain_pct_per_h, charge_pct_per_h: battery rates.
        rpc_start_delay_s: MainActivity's delay before it starts the RPC activity
            (apache/tvm apps/android_rpc MainActivity.HANDLER_RESTART_DELAY = 5000 ms).
        boot_time_s: how long a reboot keeps the phone away from the adb server.
        kernel_release: ``uname -r`` and ``/proc/version``'s release. Only
            the MT8168's is captured (fixtures README, MTK-BR); the others
            follow their kernel branch (``ro.kernel.version`` of the Motorola
            capture is 5.4; a Pixel 8 launched on the android14-5.15 GKI).
        getprop_fixture: the ``getprop`` capture in ``fixtures/`` this model
            reports (see :mod:`farm.virtual.android.props`); ``""`` for none.
        extra_props: properties set on top of everything else.
    """

    serial_port: int = 0
    model: str = "Pixel 8"
    manufacturer: str = "Google"
    brand: str = "google"
    device: str = "shiba"
    product: str = "shiba"
    soc_manufacturer: str = "Google"
    soc_model: str = "Tensor G3"
    board_platform: str = "zuma"
    hardware: str = "shiba"
    sdk: int = 34
    release: str = "14"
    build_id: str = "UQ1A.240105.004"
    build_incremental: str = "11206848"
    build_type: str = "user"
    cpu_abi: str = "x86_64"
    core_max_freq_khz: tuple[int, ...] = (1704000,) * 4 + (2367000,) * 4 + (2914000,)
    core_parts: tuple[str, ...] = ("0xd46",) * 4 + ("0xd4d",) * 4 + ("0xd4e",)
    mem_total_kb: int = 7_869_464
    storage_total_kb: int = 115_793_320
    storage_used_kb: int = 14_802_116
    battery_capacity_mah: int = 4575
    sensors: tuple[ThermalSensor, ...] = (
        ThermalSensor("BIG", TYPE_CPU, "BIG", 6.0, 38.0),
        ThermalSensor("MID", TYPE_CPU, "MID", 5.0, 30.0),
        ThermalSensor("LITTLE", TYPE_CPU, "LITTLE", 4.0, 22.0),
        ThermalSensor("G3D", TYPE_GPU, "G3D", 4.0, 15.0),
        ThermalSensor("battery", TYPE_BATTERY, "battery", 2.0, 9.0),
        ThermalSensor("skin", TYPE_SKIN, "skin", 3.0, 16.0),
    )
    throttling_thresholds_c: tuple[float, ...] = (39.0, 43.0, 45.0, 47.0, 50.0, 55.0)
    thermal_speed: tuple[float, ...] = (1.0, 1.0, 0.85, 0.6, 0.4, 0.25, 0.1)
    gpu: GpuKind = "mali"
    network: NetworkMode = "usb-only"
    rooted: bool = False
    debuggable: bool = False
    screen_w_px: int = 1080
    screen_h_px: int = 2400
    density_dpi: int = 420
    ambient_c: float = 25.0
    heat_time_constant_s: float = 120.0
    battery_pct: float = 80.0
    plugged: bool = True
    idle_drain_pct_per_h: float = 1.5
    load_drain_pct_per_h: float = 25.0
    charge_pct_per_h: float = 40.0
    rpc_start_delay_s: float = 5.0
    boot_time_s: float = 3.0
    kernel_release: str = "5.15.110-android14-11"
    getprop_fixture: str = "getprop__pixel8_shiba_android14_reconstructed.txt"
    extra_props: tuple[tuple[str, str], ...] = field(default=())

    @property
    def cores(self) -> int:
        """Number of CPU cores (``nproc``)."""
        return len(self.core_max_freq_khz)

    @property
    def fingerprint(self) -> str:
        """``ro.build.fingerprint``: brand/product/device:release/id/incremental:type/tags."""
        tags = "release-keys" if self.build_type == "user" else "dev-keys"
        return (
            f"{self.brand}/{self.product}/{self.device}:{self.release}/{self.build_id}/"
            f"{self.build_incremental}:{self.build_type}/{tags}"
        )

    @property
    def hottest_sensor(self) -> ThermalSensor:
        """The sensor whose temperature sets the thermal status."""
        return max(self.sensors, key=lambda s: s.idle_offset_c + s.load_rise_c)


PIXEL_8 = PhoneSpec()

GALAXY_A52 = PhoneSpec(
    model="SM-A525F",
    manufacturer="samsung",
    brand="samsung",
    device="a52q",
    product="a52qnsxx",
    soc_manufacturer="QTI",
    soc_model="SM7125",
    board_platform="atoll",
    hardware="qcom",
    sdk=33,
    release="13",
    build_id="TP1A.220624.014",
    build_incremental="A525FXXS6EWH3",
    core_max_freq_khz=(1804800,) * 6 + (2304000,) * 2,
    core_parts=("0xd05",) * 6 + ("0xd0b",) * 2,
    mem_total_kb=5_652_784,
    storage_total_kb=110_647_428,
    storage_used_kb=21_356_012,
    battery_capacity_mah=4500,
    sensors=(
        ThermalSensor("AP", TYPE_CPU, "cpu-1-0-usr", 5.0, 36.0),
        ThermalSensor("BAT", TYPE_BATTERY, "battery", 2.0, 9.0),
        ThermalSensor("LRB", TYPE_SKIN, "skin-therm", 3.0, 15.0),
        ThermalSensor("PA", 5, "pa-therm0", 2.0, 6.0),
    ),
    throttling_thresholds_c=(40.0, 44.0, 46.0, 48.0, 52.0, 56.0),
    gpu="adreno",
    screen_w_px=1080,
    screen_h_px=2400,
    density_dpi=450,
    kernel_release="4.19.157-perf",
    getprop_fixture="",  # no capture of this model: only the spec's properties
)

MTK_TABLET = PhoneSpec(
    model="tb8168p1_64_bsp_k510",
    manufacturer="AXXS",
    brand="AXXS",
    device="tb8168p1_64_bsp_k510",
    product="vnd_tb8168p1_64_bsp_k510",
    soc_manufacturer="Mediatek",
    soc_model="MT8168B",
    board_platform="mt8168",
    hardware="mt8168",
    sdk=33,
    release="13",
    build_id="TQ3A.230805.001.S2",
    build_incremental="mp5V424",
    build_type="userdebug",
    core_max_freq_khz=(2000000,) * 4,
    core_parts=("0xd04",) * 4,
    mem_total_kb=3_889_512,
    storage_total_kb=54_563_696,
    storage_used_kb=411_164,
    battery_capacity_mah=5000,
    sensors=(
        ThermalSensor("CPU", TYPE_CPU, "mtktscpu", 6.0, 35.0),
        ThermalSensor("GPU", TYPE_GPU, "mtktsgpu", 4.0, 14.0),
        ThermalSensor("BATTERY", TYPE_BATTERY, "mtktsbattery", 2.0, 8.0),
        ThermalSensor("SKIN", TYPE_SKIN, "mtktsAP", 3.0, 14.0),
    ),
    throttling_thresholds_c=(45.0, 50.0, 55.0, 60.0, 70.0, 85.0),
    gpu="mali",
    debuggable=True,
    screen_w_px=800,
    screen_h_px=1280,
    density_dpi=240,
    kernel_release="5.10.101-android12-9",
    getprop_fixture="getprop__mtk_tb8168_android13.txt",
)

MOTO_EDGE_20 = PhoneSpec(
    model="motorola edge 20",
    manufacturer="motorola",
    brand="motorola",
    device="berlin",
    product="berlin_global",
    soc_manufacturer="QTI",
    soc_model="SM7325",
    board_platform="lahaina",
    hardware="qcom",
    sdk=33,
    release="13",
    build_id="T1RGS33.135-109-9-1",
    build_incremental="cd9ba-7b59ee",
    core_max_freq_khz=(1804800,) * 4 + (2419200,) * 3 + (2707200,),
    core_parts=("0xd05",) * 4 + ("0xd41",) * 4,
    mem_total_kb=7_700_428,
    storage_total_kb=110_440_244,
    storage_used_kb=17_113_520,
    battery_capacity_mah=4000,
    sensors=(
        ThermalSensor("cpu-1-0-usr", TYPE_CPU, "cpu-1-0-usr", 6.0, 37.0),
        ThermalSensor("gpuss-0-usr", TYPE_GPU, "gpuss-0-usr", 4.0, 16.0),
        ThermalSensor("battery", TYPE_BATTERY, "battery", 2.0, 9.0),
        ThermalSensor("skin", TYPE_SKIN, "skin-therm", 3.0, 15.0),
    ),
    throttling_thresholds_c=(41.0, 44.0, 47.0, 50.0, 53.0, 57.0),
    gpu="adreno",
    screen_w_px=1080,
    screen_h_px=2400,
    density_dpi=400,
    kernel_release="5.4.210-qgki",
    getprop_fixture="getprop__motorola_edge20_berlin_android13.txt",
)

_PROFILES = (PIXEL_8, GALAXY_A52, MTK_TABLET, MOTO_EDGE_20)


def profiles(n: int, network: NetworkMode = "usb-only", *,
             same_model: bool = False) -> list[PhoneSpec]:
    """``n`` phone specs cycling through the built-in models.

    Args:
        n: how many phones.
        network: the network mode every phone gets.
        same_model: every phone of the first model (a Pixel 8), as a tuning
            job over several phones needs (it measures on phones of one model).

    Returns:
        Specs with ``serial_port`` 0 (the fleet assigns ports) and the given network.
    """
    models = _PROFILES[:1] if same_model else _PROFILES
    return [dataclasses.replace(models[i % len(models)], network=network) for i in range(n)]
