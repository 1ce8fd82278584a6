"""Read a phone's device facts (model, SoC, ABI, SDK, cores, memory, GPU APIs).

One adb round trip; parsing is :func:`farm.device.facts.facts_from`'s. Facts
change only with a system update, so they are read at provisioning and kept.
"""

from __future__ import annotations

import dataclasses

from farm.adb import Adb
from farm.device.batch import batch_script, split_batch
from farm.device.cpu import parse_cpufreq_max, parse_proc_meminfo
from farm.device.facts import DeviceFacts, facts_from
from farm.device.getprop import parse_getprop
from farm.errors import AdbError

# Where Android vendors put the OpenCL ICD/driver (Khronos loader convention;
# Qualcomm and Arm both ship /vendor/lib64/libOpenCL.so).
OPENCL_LIBS = (
    "/vendor/lib64/libOpenCL.so",
    "/system/vendor/lib64/libOpenCL.so",
    "/vendor/lib/libOpenCL.so",
    "/system/lib64/libOpenCL.so",
)
_SECTIONS = {
    "getprop": ["getprop"],
    # cpu[0-9] then cpu[1-9][0-9]: numeric order for up to 100 cores, where one
    # glob would put cpu10 before cpu2.
    "cpufreq": ["sh", "-c", ("cat /sys/devices/system/cpu/cpu[0-9]/cpufreq/cpuinfo_max_freq "
                             "/sys/devices/system/cpu/cpu[1-9][0-9]/cpufreq/cpuinfo_max_freq")],
    "meminfo": ["cat", "/proc/meminfo"],
    "opencl": ["ls", *OPENCL_LIBS],
}


def read_facts(adb: Adb, serial: str) -> DeviceFacts:
    """The phone's facts.

    Raises:
        AdbError: a reading is missing or unreadable (the message says which).
        PhoneFault: adb failed.
    """
    argv = ["sh", "-c", batch_script(_SECTIONS)]
    out = split_batch(adb.shell(serial, argv, timeout_s=30).out)
    try:
        facts = facts_from(
            parse_getprop(out.get("getprop", "")),
            parse_cpufreq_max(out.get("cpufreq", "")),
            parse_proc_meminfo(out.get("meminfo", "")),
            opencl_libs_present=bool(out.get("opencl", "").strip()),
            serial=serial,
        )
    except ValueError as exc:
        raise AdbError(serial, argv, None, f"cannot read device facts: {exc}") from exc
    return facts


def facts_record(facts: DeviceFacts) -> dict[str, object]:
    """The JSON stored as a device's ``facts``.

    Every DeviceFacts field, plus the names the scheduler (``abi``, ``abis``,
    ``soc``, ``sdk``, ``gpu``) and the runner (``has_opencl``, ``has_vulkan``,
    ``num_cores``) read.

    ``gpu`` holds the GPU family and vendor (``"adreno qualcomm"``), so a job's
    ``--gpu adreno`` or ``--gpu qualcomm`` both match; one name when the family
    has no known vendor; empty without a GPU.

    ``gpu_limits`` is not here: adb cannot read it. Once the app registers,
    :func:`farm.tvm.probe.read_gpu_limits` reads it through an RPC session and
    it is stored as ``record["gpu_limits"]`` (``{}`` for a phone without an
    OpenCL or Vulkan runtime); the runner reads it back with
    :func:`farm.device.facts.gpu_limits_from`.
    """
    record: dict[str, object] = {
        name: list(value) if isinstance(value, tuple) else value
        for name, value in dataclasses.asdict(facts).items()
    }
    gpu_names = dict.fromkeys(part for part in (facts.gpu_egl, facts.gpu_vendor) if part)
    record.update(
        abis=list(facts.abilist),
        gpu=" ".join(gpu_names),
        has_opencl=facts.opencl,
        has_vulkan=facts.vulkan,
        num_cores=facts.cores,
    )
    return record
