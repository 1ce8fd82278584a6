"""A phone's static facts, assembled from ``getprop``, cpufreq and ``/proc/meminfo``.

Where each fact comes from (system properties are documented in AOSP
``build/make/tools/buildinfo.sh`` and ``android.os.Build``):

=================  ============================================================
serial             ``ro.serialno`` (``Build.getSerial()``), unless the caller
                   passes the adb serial (TCP phones are ``host:port`` in adb)
model              ``ro.product.model`` (``Build.MODEL``)
manufacturer       ``ro.product.manufacturer`` (``Build.MANUFACTURER``)
soc                ``ro.soc.model`` (``Build.SOC_MODEL``, Android 12+), else
                   ``ro.board.platform``, else ``ro.hardware``
abi                ``ro.product.cpu.abi`` (primary ABI)
abilist            ``ro.product.cpu.abilist`` (comma separated, ``Build.SUPPORTED_ABIS``)
sdk                ``ro.build.version.sdk`` (``Build.VERSION.SDK_INT``)
release            ``ro.build.version.release`` (``Build.VERSION.RELEASE``)
fingerprint        ``ro.build.fingerprint`` (``Build.FINGERPRINT``)
debuggable         ``ro.debuggable`` = ``1`` (userdebug/eng builds; ``run-as`` and
                   ``adb root`` need it)
cores              number of ``cpufreq/cpuinfo_max_freq`` values
big_core_mask      :func:`farm.device.cpu.big_core_mask` of those values
mem_total_kb       ``MemTotal`` of ``/proc/meminfo``
opencl             whether an OpenCL driver library (``libOpenCL.so``) was found
                   on the phone; Android has no property for it
vulkan             ``ro.hardware.vulkan`` is set: the Vulkan loader loads
                   ``vulkan.<ro.hardware.vulkan>.so`` (AOSP
                   ``frameworks/native/vulkan/libvulkan/driver.cpp``)
gpu_egl            ``ro.hardware.egl`` as printed (the EGL driver suffix
                   ``libEGL_<name>.so``, AOSP ``frameworks/native/opengl/libs/EGL/Loader.cpp``),
                   the GPU family: ``adreno``, ``mali``, ``powervr``...; ``""`` if unset
gpu_vendor         from ``gpu_egl``: ``adreno`` -> qualcomm, ``mali`` -> arm,
                   ``powervr`` -> imagination; other names are kept as printed
=================  ============================================================

A phone's GPU limits are read through an RPC session, not adb
(:func:`farm.tvm.probe.read_gpu_limits`); :func:`gpu_limits_from` checks them
into the shape kept as ``facts["gpu_limits"]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from farm.device.cpu import big_core_mask

_GPU_VENDORS = {"adreno": "qualcomm", "mali": "arm", "powervr": "imagination"}

#: The GPU APIs whose limits are read, by TVM runtime device name.
GPU_APIS = ("opencl", "vulkan")

#: ``tvm.runtime.Device`` attributes kept per GPU API (apache/tvm
#: ``python/tvm/runtime/device.py``): threads in one work-group (OpenCL
#: ``CL_DEVICE_MAX_WORK_GROUP_SIZE``), threads run in lockstep (TVM answers 1
#: for OpenCL whatever the GPU), local memory per work-group in bytes, and
#: compute units. Each is a positive int.
GPU_LIMITS = (
    "max_threads_per_block",
    "warp_size",
    "max_shared_memory_per_block",
    "multi_processor_count",
)


@dataclass(frozen=True)
class DeviceFacts:
    """Facts about a phone that change only with a system update (see module doc)."""

    serial: str
    model: str
    manufacturer: str
    soc: str
    abi: str
    abilist: tuple[str, ...]
    sdk: int
    release: str
    fingerprint: str
    debuggable: bool
    cores: int
    big_core_mask: int
    mem_total_kb: int
    opencl: bool
    vulkan: bool
    gpu_egl: str
    gpu_vendor: str
    #: The phone's RPC server runs this host's code (a farm virtual phone sets
    #: ``ro.farm.host_runtime=1``); its modules are built for the host, not Android.
    host_runtime: bool = False


def _required(props: Mapping[str, str], name: str) -> str:
    value = props.get(name, "").strip()
    if not value:
        raise ValueError(f"device facts: property {name} is missing or empty")
    return value


def facts_from(
    getprop: Mapping[str, str],
    cpufreq_max: Sequence[int],
    meminfo: Mapping[str, int],
    opencl_libs_present: bool,
    *,
    serial: str | None = None,
) -> DeviceFacts:
    """Assemble :class:`DeviceFacts` from parsed readings.

    Args:
        getprop: from :func:`farm.device.getprop.parse_getprop`.
        cpufreq_max: max kHz per core, from :func:`farm.device.cpu.parse_cpufreq_max`.
        meminfo: from :func:`farm.device.cpu.parse_proc_meminfo`.
        opencl_libs_present: whether ``libOpenCL.so`` exists in a vendor or
            system library folder (the caller checks with ``ls``).
        serial: the adb serial to record instead of ``ro.serialno``.

    Returns:
        The facts.

    Raises:
        ValueError: a required property (model, manufacturer, ABI, SDK,
            release, fingerprint, and ``ro.serialno`` unless ``serial`` is
            given) is missing, the SDK is not an integer, there are no cores or
            ``MemTotal`` is missing.
    """
    sdk_text = _required(getprop, "ro.build.version.sdk")
    if not sdk_text.isdigit():
        raise ValueError(f"device facts: ro.build.version.sdk {sdk_text!r} is not an integer")
    if "MemTotal" not in meminfo:
        raise ValueError("device facts: /proc/meminfo has no MemTotal")
    abi = _required(getprop, "ro.product.cpu.abi")
    abilist = tuple(a for a in getprop.get("ro.product.cpu.abilist", "").split(",") if a) or (abi,)
    soc = next(
        (
            getprop[p].strip()
            for p in ("ro.soc.model", "ro.board.platform", "ro.hardware")
            if getprop.get(p, "").strip()
        ),
        "",
    )
    egl = getprop.get("ro.hardware.egl", "").strip()
    return DeviceFacts(
        serial=serial or _required(getprop, "ro.serialno"),
        model=_required(getprop, "ro.product.model"),
        manufacturer=_required(getprop, "ro.product.manufacturer"),
        soc=soc,
        abi=abi,
        abilist=abilist,
        sdk=int(sdk_text),
        release=_required(getprop, "ro.build.version.release"),
        fingerprint=_required(getprop, "ro.build.fingerprint"),
        debuggable=getprop.get("ro.debuggable", "0").strip() == "1",
        cores=len(cpufreq_max),
        big_core_mask=big_core_mask(list(cpufreq_max)),
        mem_total_kb=meminfo["MemTotal"],
        opencl=opencl_libs_present,
        vulkan=bool(getprop.get("ro.hardware.vulkan", "").strip()),
        gpu_egl=egl,
        gpu_vendor=_GPU_VENDORS.get(egl, egl),
        host_runtime=getprop.get("ro.farm.host_runtime", "").strip() == "1",
    )


def gpu_limits_from(readings: object) -> dict[str, dict[str, int]]:
    """The ``facts["gpu_limits"]`` record from raw readings, keeping only what is sound.

    Args:
        readings: API name -> attribute name -> value, as the probe child read
            them (``None`` where TVM had no answer), or a stored record; anything
            but a mapping reads as no limits.

    Returns:
        ``{"opencl": {"max_threads_per_block": 1024, ...}, ...}``: only the APIs
        of :data:`GPU_APIS` and the attributes of :data:`GPU_LIMITS`, only
        positive ints (bools, floats, strings, ``None`` and zero are dropped), and
        no entry for an API without ``max_threads_per_block`` (every GPU kernel
        needs it, so such a reading is treated as no API).
    """
    record: dict[str, dict[str, int]] = {}
    if not isinstance(readings, Mapping):
        return record
    for api in GPU_APIS:
        values = readings.get(api)
        if not isinstance(values, Mapping):
            continue
        kept = {
            name: value
            for name in GPU_LIMITS
            if type(value := values.get(name)) is int and value > 0
        }
        if "max_threads_per_block" in kept:
            record[api] = kept
    return record
