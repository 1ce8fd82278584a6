r"""Parse CPU and memory facts: ``/proc/cpuinfo``, cpufreq limits, ``/proc/meminfo``.

Sources: the arm64 kernel's ``arch/arm64/kernel/cpuinfo.c`` ``c_show()``
(``key\t: value``, a blank line between processors, no ``Hardware`` line on
modern kernels); ``mm/meminfo`` (``Label:  %8lu kB``); cpufreq sysfs
``cpuinfo_max_freq`` in kHz (``Documentation/cpu-freq/user-guide.rst``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from farm.device._text import as_text, excerpt


@dataclass(frozen=True)
class Processor:
    """One ``processor`` block of ``/proc/cpuinfo``; fields as printed (hex strings)."""

    index: int
    implementer: str = ""
    architecture: str = ""
    variant: str = ""
    part: str = ""
    revision: str = ""
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class CpuInfo:
    """``/proc/cpuinfo``: the processors and the machine-wide lines.

    Attributes:
        processors: one entry per ``processor`` block, in order.
        hardware: the ``Hardware`` line (older vendor kernels only), else ``""``.
        extra: other machine-wide ``key: value`` lines (``Revision``, ``Serial``...).
    """

    processors: tuple[Processor, ...]
    hardware: str = ""
    extra: dict[str, str] = field(default_factory=dict)


_PROCESSOR_KEYS = {
    "CPU implementer": "implementer",
    "CPU architecture": "architecture",
    "CPU variant": "variant",
    "CPU part": "part",
    "CPU revision": "revision",
}


def _processor(block: dict[str, str]) -> Processor:
    try:
        index = int(block["processor"])
    except ValueError:
        raise ValueError(
            f"/proc/cpuinfo: processor {block['processor']!r} is not a number"
        ) from None
    values = {attr: block.get(key, "") for key, attr in _PROCESSOR_KEYS.items()}
    return Processor(index=index, features=tuple(block.get("Features", "").split()), **values)


def parse_proc_cpuinfo(output: str | bytes) -> CpuInfo:
    """Parse ``cat /proc/cpuinfo`` (arm64 and older 32-bit vendor layouts).

    Args:
        output: the file's content.

    Returns:
        The processors and machine-wide lines.

    Raises:
        ValueError: a line is not ``key: value``, or there is no processor.
    """
    blocks: list[dict[str, str]] = []
    machine: dict[str, str] = {}
    current: dict[str, str] | None = None
    for line in as_text(output).split("\n"):
        if not line.strip():
            current = None
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"/proc/cpuinfo: cannot read line {line!r}")
        key, value = key.strip(), value.strip()
        if key == "processor":
            current = {}
            blocks.append(current)
        # "Processor : AArch64 Processor rev 4" (capital P) is machine-wide on old kernels.
        target = current if current is not None else machine
        target[key] = value
    if not blocks:
        raise ValueError("/proc/cpuinfo: no 'processor' line")
    hardware = machine.pop("Hardware", "")
    return CpuInfo(tuple(_processor(b) for b in blocks), hardware, machine)


def parse_cpufreq_max(output: str | bytes) -> list[int]:
    """Parse ``cat /sys/devices/system/cpu/cpu*/cpufreq/cpuinfo_max_freq``.

    Args:
        output: one kHz value per line, in glob order. Glob order is numeric
            up to cpu9; callers with 10+ cores must list the files in numeric
            order themselves (``cpu10`` sorts before ``cpu2``).

    Returns:
        Max frequency per core in kHz, in the order printed.

    Raises:
        ValueError: empty output or a value that is not a positive integer.
    """
    values = as_text(output).split()
    if not values:
        raise ValueError("cpufreq: no cpuinfo_max_freq values")
    result = []
    for value in values:
        if not value.isdigit() or int(value) == 0:
            raise ValueError(f"cpufreq: {value!r} is not a positive kHz value")
        result.append(int(value))
    return result


def big_core_mask(max_khz: list[int]) -> int:
    """Return the bit mask of the cores in the fastest cluster.

    A core is "big" when its max frequency equals the highest one: the same
    rule TVM's thread pool uses for ``kBig`` affinity (apache/tvm
    ``src/runtime/threading_backend.cc`` ``InitSortedOrder()``: ``big_count_``
    counts the cores whose max frequency equals the top one). So the mask
    matches the cores TVM will pin to. On a 1+3+4 phone (Pixel 8: 4x1.70,
    4x2.37, 1x2.91 GHz) that is the single prime core, ``0x100``; a
    homogeneous CPU gets all cores.

    Args:
        max_khz: max frequency per core in kHz, index = core number.

    Returns:
        Bit i set when core i is big.

    Raises:
        ValueError: ``max_khz`` is empty.
    """
    if not max_khz:
        raise ValueError("big_core_mask: no cores")
    top = max(max_khz)
    return sum(1 << core for core, khz in enumerate(max_khz) if khz == top)


def parse_proc_meminfo(output: str | bytes) -> dict[str, int]:
    """Parse ``cat /proc/meminfo``.

    Args:
        output: the file's content, ``Label:  value kB`` per line.

    Returns:
        Label to value in kB (KiB); unit-less lines (``HugePages_Total``) keep
        their raw count.

    Raises:
        ValueError: a line is unreadable or ``MemTotal`` is missing.
    """
    result: dict[str, int] = {}
    for line in as_text(output).split("\n"):
        if not line.strip():
            continue
        label, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts or not parts[0].isdigit() or parts[1:] not in ([], ["kB"]):
            raise ValueError(f"/proc/meminfo: cannot read line {line!r}")
        result[label.strip()] = int(parts[0])
    if "MemTotal" not in result:
        raise ValueError(f"/proc/meminfo: no MemTotal in {excerpt(as_text(output))!r}")
    return result
