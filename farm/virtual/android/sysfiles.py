r"""Files under ``/proc`` and ``/sys``, rendered on read from the phone's state.

Formats follow the real captures in ``fixtures/``:

* ``/proc/cpuinfo``: the layout of the phone's ABI, so it agrees with
  ``ro.product.cpu.abi`` and ``uname -m``. arm64: the kernel layout of
  ``proc_cpuinfo__pixel8_shiba_android14.txt`` (``key\t: value``, ``CPU
  architecture: 8`` without a tab, blocks separated by a blank line, no
  ``Hardware`` line). x86_64 (every profile: the phone runs host code): the
  block of ``proc_cpuinfo__x86_64_kvm_host_block.txt`` once per core,
  renumbered, as the x86_64 emulator shows its host's CPU.
* ``/proc/meminfo``: label with colon padded to 16 columns, ``%8lu kB`` (kernel
  ``show_val_kb``), as ``proc_meminfo__mtk_tb8168_android13.txt``.
* ``/sys/class/thermal/thermal_zoneN/temp``: millidegrees C, one line.
* ``/sys/devices/system/cpu/cpuN/cpufreq/cpuinfo_max_freq``: kHz, one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from farm.virtual.android.phone import AndroidPhone
    from farm.virtual.android.spec import PhoneSpec

_FEATURES = (
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt "
    "fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 asimdfhm dit uscat ilrcpc flagm ssbs sb "
    "paca pacg dcpodp flagm2 frint i8mm bti"
)


def machine(cpu_abi: str) -> str:
    """``uname -m`` for an Android ABI: ``x86_64`` or ``aarch64``."""
    return "x86_64" if cpu_abi == "x86_64" else "aarch64"


def proc_version(spec: PhoneSpec) -> str:
    """``/proc/version`` (its release is ``uname -r``)."""
    return (
        f"Linux version {spec.kernel_release} (build-user@build-host) "
        "(Android (8508608, based on r450784e) clang version 14.0.7) #1 SMP PREEMPT "
        "Mon Jan 1 00:00:00 UTC 2024\n"
    )


@cache
def _x86_block() -> str:
    return resources.files("farm.virtual.android").joinpath(
        "fixtures/proc_cpuinfo__x86_64_kvm_host_block.txt").read_text()


def render_cpuinfo_x86(cores: int) -> str:
    """``/proc/cpuinfo`` of an x86_64 kernel: the captured block per core, renumbered."""
    blocks = []
    for i in range(cores):
        block = _x86_block()
        for key, value in (("processor", i), ("core id", i), ("apicid", i),
                           ("initial apicid", i), ("siblings", cores), ("cpu cores", cores)):
            block = re.sub(rf"(?m)^({re.escape(key)}\t+: ).*$", rf"\g<1>{value}", block)
        blocks.append(block)
    return "".join(blocks)


def render_cpuinfo(spec: PhoneSpec) -> str:
    """``/proc/cpuinfo`` for the spec's ABI (see the module docstring)."""
    if spec.cpu_abi == "x86_64":
        return render_cpuinfo_x86(spec.cores)
    return render_cpuinfo_arm64(spec.core_parts)


def render_cpuinfo_arm64(core_parts: tuple[str, ...]) -> str:
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
        "/proc/cpuinfo": lambda: render_cpuinfo(spec),
        "/proc/meminfo": lambda: render_meminfo(spec.mem_total_kb, phone.mem_used_kb()),
        "/proc/version": lambda: proc_version(spec),
        "/proc/loadavg": lambda: (
            f"{phone.physics.load * spec.cores:.2f} 1.00 1.00 2/1500 {phone.processes.last_pid}\n"
        ),
        "/proc/uptime": lambda: (
            f"{phone.uptime_s():.2f} {phone.uptime_s() * spec.cores * 0.8:.2f}\n"
        ),
        "/sys/devices/system/cpu/possible": lambda: f"0-{spec.cores - 1}\n",
        "/sys/devices/system/cpu/present": lambda: f"0-{spec.cores - 1}\n",
        "/sys/devices/system/cpu/online": lambda: f"0-{spec.cores - 1}\n",
        "/sys/class/power_supply/battery/capacity": lambda: f"{phone.physics.level()}\n",
        "/sys/class/power_supply/battery/temp": lambda: (
            f"{round(phone.physics.battery_celsius() * 10)}\n"
        ),
        "/sys/class/power_supply/battery/status": lambda: (
            "Charging\n" if phone.physics.plugged and phone.physics.level() < 100
            else "Full\n" if phone.physics.plugged else "Discharging\n"
        ),
    }
    for i, khz in enumerate(spec.core_max_freq_khz):
        base = f"/sys/devices/system/cpu/cpu{i}/cpufreq"
        files[f"{base}/cpuinfo_max_freq"] = _constant(f"{khz}\n")
        files[f"{base}/cpuinfo_min_freq"] = _constant("300000\n")
        files[f"{base}/scaling_max_freq"] = _constant(f"{khz}\n")
        files[f"{base}/scaling_cur_freq"] = _cur_freq(phone, khz)
    for i, sensor in enumerate(spec.sensors):
        base = f"/sys/class/thermal/thermal_zone{i}"
        files[f"{base}/type"] = _constant(f"{sensor.zone_type}\n")
        files[f"{base}/temp"] = _zone_temp(phone, sensor.name)
    return files


def _constant(text: str) -> Callable[[], str]:
    """A file whose text is fixed by the phone's spec."""
    return lambda: text


def _cur_freq(phone: AndroidPhone, max_khz: int) -> Callable[[], str]:
    """``scaling_cur_freq`` in kHz: from 300 MHz up to ``max_khz`` with the load, 1 MHz steps."""

    def render() -> str:
        load = max(0.1, phone.physics.load)
        return f"{int(300000 + (max_khz - 300000) * load) // 1000 * 1000}\n"

    return render


def _zone_temp(phone: AndroidPhone, sensor: str) -> Callable[[], str]:
    """A thermal zone's ``temp``: the named sensor's temperature in millidegrees C."""
    return lambda: f"{round(phone.physics.temperatures()[sensor] * 1000)}\n"


def virtual_dirs(files: dict[str, Callable[[], str]]) -> dict[str, set[str]]:
    """Directory listings implied by the virtual file paths."""
    dirs: dict[str, set[str]] = {}
    for path in files:
        parts = path.strip("/").split("/")
        for depth in range(len(parts)):
            parent = "/" + "/".join(parts[:depth])
            dirs.setdefault(parent, set()).add(parts[depth])
    return dirs
