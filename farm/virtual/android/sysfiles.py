"""Files under ``/proc`` and ``/sys``, rendered on read from the phone's state.

Formats follow the real captures in ``fixtures/``:

* ``/proc/cpuinfo``: the arm64 kernel layout of ``proc_cpuinfo__pixel8_shiba_android14.txt``
  (``key\\t: value``, ``CPU architecture: 8`` without a tab, blocks separated by
  a blank line, no ``Hardware`` line).
* ``/proc/meminfo``: label with colon padded to 16 columns, ``%8lu kB`` (kernel
  ``show_val_kb``), as ``proc_meminfo__mtk_tb8168_android13.txt``.
* ``/sys/class/thermal/thermal_zoneN/temp``: millidegrees C, one line.
* ``/sys/devices/system/cpu/cpuN/cpufreq/cpuinfo_max_freq``: kHz, one line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from farm.virtual.android.phone import AndroidPhone

_FEATURES = (
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt "
    "fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 asimdfhm dit uscat ilrcpc flagm ssbs sb "
    "paca pacg dcpodp flagm2 frint i8mm bti"
)


def render_cpuinfo(core_parts: tuple[str, ...]) -> str:
    """``/proc/cpuinfo`` of an arm64 kernel with one block per core."""
    blocks = []
    for i, part in enumerate(core_parts):
        blocks.append(
            f"processor\t: {i}\n"
            "BogoMIPS\t: 49.15\n"
            f"Features\t: {_FEATURES}\n"
            "CPU implementer\t: 0x41\n"
            "CPU architecture: 8\n"
            "CPU variant\t: 0x1\n"
            f"CPU part\t: {part}\n"
            "CPU revision\t: 0\n"
        )
    return "\n".join(blocks)


def meminfo_line(label: str, value_kb: int) -> str:
    """One ``/proc/meminfo`` line: ``label:`` padded to 16, value ``%8d``, `` kB``."""
    return f"{label + ':':<16}{value_kb:>8} kB\n"


def render_meminfo(total_kb: int, used_kb: int) -> str:
    """``/proc/meminfo`` with the modern GKI field set."""
    free = max(0, total_kb - used_kb)
    cached = total_kb // 4
    fields = [
        ("MemTotal", total_kb),
        ("MemFree", free // 3),
        ("MemAvailable", free),
        ("Buffers", total_kb // 28),
        ("Cached", cached),
        ("SwapCached", 0),
        ("Active", total_kb // 10),
        ("Inactive", cached),
        ("Active(anon)", total_kb // 40),
        ("Inactive(anon)", total_kb // 30),
        ("Active(file)", total_kb // 14),
        ("Inactive(file)", total_kb // 5),
        ("Unevictable", 4980),
        ("Mlocked", 4980),
        ("SwapTotal", total_kb // 2),
        ("SwapFree", total_kb // 2),
        ("Dirty", 124),
        ("Writeback", 0),
        ("AnonPages", total_kb // 18),
        ("Mapped", total_kb // 9),
        ("Shmem", 9876),
        ("KReclaimable", 88000),
        ("Slab", 190000),
        ("SReclaimable", 88000),
        ("SUnreclaim", 102000),
        ("KernelStack", 34000),
        ("ShadowCallStack", 8600),
        ("PageTables", 61000),
        ("NFS_Unstable", 0),
        ("Bounce", 0),
        ("WritebackTmp", 0),
        ("CommitLimit", total_kb),
        ("Committed_AS", total_kb * 9),
        ("VmallocTotal", 262930368),
        ("VmallocUsed", 43120),
        ("VmallocChunk", 0),
        ("Percpu", 3264),
        ("AnonHugePages", 0),
        ("ShmemHugePages", 0),
        ("ShmemPmdMapped", 0),
        ("FileHugePages", 0),
        ("FilePmdMapped", 0),
        ("CmaTotal", 0),
        ("CmaFree", 0),
    ]
    return "".join(meminfo_line(k, v) for k, v in fields)


def virtual_files(phone: AndroidPhone) -> dict[str, Callable[[], str]]:
    """Every rendered file of the phone, by absolute device path."""
    spec = phone.spec
    files: dict[str, Callable[[], str]] = {
        "/proc/cpuinfo": lambda: render_cpuinfo(spec.core_parts),
        "/proc/meminfo": lambda: render_meminfo(spec.mem_total_kb, phone.mem_used_kb()),
        "/proc/version": lambda: (
            "Linux version 5.10.198-android13-4-00050-g12f3388846c3 (build-user@build-host) "
            "(Android (8508608, based on r450784e) clang version 14.0.7) #1 SMP PREEMPT "
            "Mon Jan 1 00:00:00 UTC 2024\n"
        ),
        "/proc/loadavg": lambda: f"{phone.physics.load * spec.cores:.2f} 1.00 1.00 2/1500 {phone.processes.last_pid}\n",
        "/proc/uptime": lambda: f"{phone.uptime_s():.2f} {phone.uptime_s() * spec.cores * 0.8:.2f}\n",
        "/sys/devices/system/cpu/possible": lambda: f"0-{spec.cores - 1}\n",
        "/sys/devices/system/cpu/present": lambda: f"0-{spec.cores - 1}\n",
        "/sys/devices/system/cpu/online": lambda: f"0-{spec.cores - 1}\n",
        "/sys/class/power_supply/battery/capacity": lambda: f"{phone.physics.level()}\n",
        "/sys/class/power_supply/battery/temp": lambda: f"{round(phone.physics.battery_temp_c() * 10)}\n",
        "/sys/class/power_supply/battery/status": lambda: (
            "Charging\n" if phone.physics.plugged and phone.physics.level() < 100
            else "Full\n" if phone.physics.plugged else "Discharging\n"
        ),
    }
    for i, khz in enumerate(spec.core_max_freq_khz):
        base = f"/sys/devices/system/cpu/cpu{i}/cpufreq"
        files[f"{base}/cpuinfo_max_freq"] = lambda khz=khz: f"{khz}\n"
        files[f"{base}/cpuinfo_min_freq"] = lambda: "300000\n"
        files[f"{base}/scaling_max_freq"] = lambda khz=khz: f"{khz}\n"
        files[f"{base}/scaling_cur_freq"] = lambda khz=khz: f"{int(300000 + (khz - 300000) * max(0.1, phone.physics.load)) // 1000 * 1000}\n"
    for i, sensor in enumerate(spec.sensors):
        base = f"/sys/class/thermal/thermal_zone{i}"
        files[f"{base}/type"] = lambda sensor=sensor: f"{sensor.zone_type}\n"
        files[f"{base}/temp"] = lambda sensor=sensor: f"{round(phone.physics.temperatures()[sensor.name] * 1000)}\n"
    return files


def virtual_dirs(files: dict[str, Callable[[], str]]) -> dict[str, set[str]]:
    """Directory listings implied by the virtual file paths."""
    dirs: dict[str, set[str]] = {}
    for path in files:
        parts = path.strip("/").split("/")
        for depth in range(len(parts)):
            parent = "/" + "/".join(parts[:depth])
            dirs.setdefault(parent, set()).add(parts[depth])
    return dirs
