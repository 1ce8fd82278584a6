"""``dumpsys battery|thermalservice|power|meminfo|window|package`` and ``df``.

Layouts, per fixture:

* battery: AOSP ``BatteryService.dumpInternal``; Android 13 (sdk 33) prints no
  ``Dock powered`` (``dumpsys_battery__mtk_tb8168_android13.txt``), Android 14
  adds it (``dumpsys_battery__honor_x8b_android14.txt``), Android 15+ adds
  ``Charging state``/``Charging policy`` (``dumpsys_battery__aosp_2024_derived.txt``).
* thermalservice: ``ThermalManagerService.dumpInternal``, TAB-indented items,
  ``ThermalHAL 2.0 connected: yes`` before Android 13, ``ThermalHAL AIDL 1  connected: yes``
  (two spaces) from 13 (``dumpsys_thermalservice__samsung_*``).
* power: the MTK Android 13 capture with the live fields substituted.
* df: toybox ``df.c``: widths measured from the widest cell, filesystem column
  at least 14 (``-k``) or 15 (``-h``) wide, ``/data`` reported as ``/data/user/0``.
"""

from __future__ import annotations

import math
import re
from importlib import resources

from farm.virtual.android.cmd_pm import _dump as dump_package
from farm.virtual.android.context import Ctx, command


def render_battery(sdk: int, *, ac: bool, usb: bool, charge_counter_uah: int, status: int,
                   level: int, voltage_mv: int, temp_tenths_c: int, max_current_ua: int = 500000,
                   max_voltage_uv: int = 5000000, technology: str = "Li-ion") -> str:
    """``dumpsys battery`` text for the given Android API level and values."""
    lines = [
        "Current Battery Service state:",
        f"  AC powered: {str(ac).lower()}",
        f"  USB powered: {str(usb).lower()}",
        "  Wireless powered: false",
    ]
    if sdk >= 34:
        lines.append("  Dock powered: false")
    lines += [
        f"  Max charging current: {max_current_ua}",
        f"  Max charging voltage: {max_voltage_uv}",
        f"  Charge counter: {charge_counter_uah}",
        f"  status: {status}",
        "  health: 2",
        "  present: true",
        f"  level: {level}",
        "  scale: 100",
        f"  voltage: {voltage_mv}",
        f"  temperature: {temp_tenths_c}",
        f"  technology: {technology}",
    ]
    if sdk >= 35:
        lines += [f"  Charging state: {1 if usb or ac else 0}", "  Charging policy: 1"]
    return "\n".join(lines) + "\n"


def _jfloat(value: float) -> str:
    """Java ``Float.toString`` for one-decimal values (``25.6``, ``30.0``)."""
    return repr(round(value, 1))


def render_thermal(sdk: int, status: int, temps: list[tuple[str, int, float, int]],
                   thresholds: list[tuple[str, int, tuple[float, ...]]]) -> str:
    """``dumpsys thermalservice``.

    Args:
        sdk: Android API level (picks the HAL line).
        status: overall thermal status 0..6.
        temps: ``(name, type, value_c, status)`` per sensor.
        thresholds: ``(name, type, hot thresholds for statuses 0..6)``.
    """
    temp_lines = [
        f"\tTemperature{{mValue={_jfloat(v)}, mType={t}, mName={n}, mStatus={s}}}"
        for n, t, v, s in temps
    ]
    hal = "\tThermalHAL AIDL 1  connected: yes" if sdk >= 33 else "\tThermalHAL 2.0 connected: yes"
    lines = [
        "IsStatusOverride: false",
        "ThermalEventListeners:",
        "\tcallbacks: 1",
        "\tkilled: false",
        "\tbroadcasts count: -1",
        "ThermalStatusListeners:",
        "\tcallbacks: 4",
        "\tkilled: false",
        "\tbroadcasts count: -1",
        f"Thermal Status: {status}",
        "Cached temperatures:",
        *temp_lines,
        "HAL Ready: true",
        "HAL connection:",
        hal,
        "Current temperatures from HAL:",
        *temp_lines,
        "Current cooling devices from HAL:",
        "Temperature static thresholds from HAL:",
    ]
    for name, typ, hot in thresholds:
        hot_text = ", ".join("NaN" if math.isnan(v) else _jfloat(v) for v in hot)
        nan7 = ", ".join(["NaN"] * 7)
        lines.append(
            f"\tTemperatureThreshold{{mType={typ}, mName={name}, "
            f"mHotThrottlingThresholds=[{hot_text}], mColdThrottlingThresholds=[{nan7}]}}"
        )
    return "\n".join(lines) + "\n"


def render_df(
    rows: list[tuple[str, int, int, int, str]], *, human: bool, min_fs_width: int = 0
) -> str:
    """toybox ``df`` for ``(filesystem, size_kb, used_kb, avail_kb, mount)`` rows."""
    head = ("Filesystem", "Size", "Used", "Avail", "Use%", "Mounted on") if human else (
        "Filesystem", "1K-blocks", "Used", "Available", "Use%", "Mounted on")
    cells = []
    for fs, size, used, avail, mount in rows:
        pct = 0 if size == 0 else -(-used * 100 // (used + avail)) if used + avail else 0
        sizes = (size, used, avail)
        nums = [_human(v) for v in sizes] if human else [str(v) for v in sizes]
        cells.append((fs, *nums, f"{pct}%", mount))
    widths = [max(len(r[i]) for r in [head, *cells]) for i in range(5)]
    widths[0] = max(widths[0], min_fs_width)
    out = []
    for row in [head, *cells]:
        line = row[0].ljust(widths[0]) + "".join(" " + row[i].rjust(widths[i]) for i in range(1, 5))
        out.append(line + " " + row[5])
    return "\n".join(out) + "\n"


def _human(kb: int) -> str:
    """toybox ``human_readable_long`` of a KiB count: ``4.7M``, ``13M``, ``52G``, ``0``."""
    value, units = kb * 1024.0, "BKMGTPE"
    if value == 0:
        return "0"
    unit = 0
    while value >= 1024 and unit < len(units) - 1 and round(value) >= 999.5:
        value /= 1024
        unit += 1
    if value < 10 and unit:
        # toybox keeps one truncated decimal below 10 (3568K -> 3.4M) and rounds above.
        tenths = int(value * 10)
        return f"{tenths // 10}.{tenths % 10}{units[unit]}"
    return f"{int(value + 0.5)}{units[unit] if unit else ''}"


@command("df")
async def df(ctx: Ctx) -> int:
    """toybox ``df [-h] [-k] [PATH...]``."""
    phone = ctx.phone
    human = "-h" in ctx.argv
    total = phone.spec.storage_total_kb
    free = phone.storage_free_bytes() // 1024
    used = total - free
    mem = phone.spec.mem_total_kb // 2
    data_row = ("/dev/block/dm-7", total, used, free, "/data")
    system = [
        ("tmpfs", mem, 2516, mem - 2516, "/dev"),
        ("tmpfs", mem, 0, mem, "/mnt"),
        ("/dev/block/dm-4", 1579928, 1575144, 0, "/"),
        ("/dev/block/dm-5", 472432, 470984, 0, "/vendor"),
        ("/dev/block/dm-6", 277748, 276916, 0, "/product"),
        ("tmpfs", mem, 8, mem - 8, "/apex"),
        ("/dev/block/sda33", 13808, 120, 13076, "/metadata"),
        data_row,
        ("/dev/fuse", total, used, free, "/storage/emulated"),
    ]
    paths = [a for a in ctx.argv[1:] if not a.startswith("-")]
    if not paths:
        ctx.print(render_df(system, human=human))
        return 0
    rows = []
    for arg in paths:
        path = ctx.path(arg)
        if path.startswith("/storage/emulated"):
            rows.append(system[-1])
        elif path.startswith("/data"):
            rows.append((*data_row[:4], "/data/user/0"))
        elif path in ("/", "/system"):
            rows.append(system[2])
        else:
            ctx.eprint(f"df: {arg}: No such file or directory\n")
            return 1
    ctx.print(render_df(rows, human=human, min_fs_width=15 if human else 14))
    return 0


@command("dumpsys")
async def dumpsys(ctx: Ctx) -> int:
    """``dumpsys SERVICE [ARGS]`` for the services farm reads."""
    if len(ctx.argv) < 2:
        ctx.eprint("dumpsys: without a service argument this virtual phone dumps nothing\n")
        return 1
    service, args = ctx.argv[1], ctx.argv[2:]
    phone = ctx.phone
    if service == "battery":
        phys = phone.physics
        level = phys.level()
        status = (5 if level >= 100 else 2) if phys.plugged else 3
        ctx.print(render_battery(
            phone.spec.sdk, ac=False, usb=phys.plugged,
            charge_counter_uah=phone.spec.battery_capacity_mah * 10 * level,
            status=status, level=level, voltage_mv=3500 + level * 8,
            temp_tenths_c=round(phys.battery_celsius() * 10),
        ))
    elif service == "thermalservice":
        phys = phone.physics
        temps = phys.temperatures()
        rows = [
            (s.name, s.hal_type, temps[s.name], phys.status_of(temps[s.name]))
            for s in phone.spec.sensors
        ]
        hottest = phone.spec.hottest_sensor
        hot_c = (float("nan"), *phone.spec.throttling_thresholds_c)
        thresholds = [(hottest.name, hottest.hal_type, hot_c)]
        ctx.print(render_thermal(phone.spec.sdk, phys.thermal_status(), rows, thresholds))
    elif service == "power":
        ctx.print(_render_power(ctx))
    elif service == "meminfo":
        ctx.print(_render_meminfo(ctx))
    elif service == "window":
        ctx.print(_render_window(ctx))
    elif service == "package" and args:
        return dump_package(ctx, args[-1])
    else:
        ctx.eprint(f"Can't find service: {service}\n")
        return 0
    return 0


def _render_power(ctx: Ctx) -> str:
    phone = ctx.phone
    text = resources.files("farm.virtual.android").joinpath(
        "fixtures/dumpsys_power__mtk_tb8168_android13_asleep.txt").read_text()
    plugged = phone.physics.plugged
    stay_on = bool(phone.stay_on_while_plugged & 2) and plugged
    subs = {
        "mWakefulness": "Awake" if phone.awake else "Asleep",
        "mIsPowered": str(plugged).lower(),
        "mPlugType": "2" if plugged else "0",
        "mBatteryLevel": str(phone.physics.level()),
        "mStayOn": str(stay_on).lower(),
        "mStayOnWhilePluggedInSetting": str(phone.stay_on_while_plugged),
    }
    for key, value in subs.items():
        text = _set_field(text, key, value)
    return text


def _set_field(text: str, key: str, value: str) -> str:
    """``text`` with the value of every indented ``key=value`` line set to ``value``."""
    return re.sub(rf"^(\s+){key}=\S*$", lambda m: f"{m.group(1)}{key}={value}", text, flags=re.M)


def _k(kb: int) -> str:
    return f"{kb:,}K"


def _render_meminfo(ctx: Ctx) -> str:
    phone = ctx.phone
    procs = sorted(phone.processes.procs.values(), key=lambda p: -p.rss_kb)
    lines = ["Applications Memory Usage (in Kilobytes):",
             f"Uptime: {int(phone.uptime_s() * 1000)} Realtime: {int(phone.uptime_s() * 1000)}", "",
             "Total RSS by process:"]
    lines += [f"{_k(p.rss_kb):>13}: {p.name} (pid {p.pid})" for p in procs if p.rss_kb]
    total = phone.spec.mem_total_kb
    used = phone.mem_used_kb()
    free = total - used
    cached_pss, cached_kernel = free // 10, free * 7 // 10
    used_pss = used * 4 // 5
    lines += ["", f"Total RAM: {_k(total)} (status normal)",
              (f" Free RAM: {_k(free)} ({_k(cached_pss):>10} cached pss + "
               f"{_k(cached_kernel):>10} cached kernel + "
               f"{_k(free - cached_pss - cached_kernel):>10} free)"),
              (f" Used RAM: {_k(used)} ({_k(used_pss):>10} used pss + "
               f"{_k(used - used_pss):>10} kernel)"),
              f" Lost RAM: {_k(total // 24):>10}",
              (f"     ZRAM: {'4K':>10} physical used for {'0K':>10} in swap "
               f"({_k(total // 2)} total swap)"),
              (f"   Tuning: 256 (large 512), oom {_k(322560):>10}, "
               f"restore limit {_k(107520):>10} (high-end-gfx)")]
    return "\n".join(lines) + "\n"


def _render_window(ctx: Ctx) -> str:
    from farm.virtual.android.tvmrpc_app import MAIN, PACKAGE, RPC

    screen = ctx.phone.screen
    if screen.foreground == "main":
        focus, app = f"{PACKAGE}/{MAIN}", f"{PACKAGE}/.MainActivity"
    elif screen.foreground == "rpc":
        focus, app = f"{PACKAGE}/{RPC}", f"{PACKAGE}/.RPCActivity"
    else:
        focus = "com.android.launcher3/com.android.launcher3.uioverrides.QuickstepLauncher"
        app = "com.android.launcher3/.uioverrides.QuickstepLauncher"
    awake = str(ctx.phone.awake).lower()
    spec = ctx.phone.spec
    return (
        "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)\n"
        "  Display: mDisplayId=0 rootTasks=1\n"
        f"    init={spec.screen_w_px}x{spec.screen_h_px} {spec.density_dpi}dpi\n"
        f"  mCurrentFocus=Window{{1651cd4 u0 {focus}}}\n"
        f"  mFocusedApp=ActivityRecord{{1f72345 u0 {app}}} t12}}\n"
        "\n"
        "WINDOW MANAGER POLICY STATE (dumpsys window policy)\n"
        f"    mAwake={awake} mScreenOnEarly={awake} mScreenOnFully={awake}\n"
    )
