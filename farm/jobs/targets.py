"""TVM compile targets from a phone's facts, in TVM 0.27's dict form.

TVM 0.27 rejects target strings such as ``"llvm -mtriple=..."``; targets are
dicts that :class:`tvm.target.Target` accepts::

    target_for(DeviceFacts(abi="arm64-v8a", gpu="Mali-G710", has_opencl=True),
               DeviceKind.OPENCL)
    == {"kind": "opencl", "device": "mali",
        "host": {"kind": "llvm", "mtriple": "aarch64-linux-android", "mattr": ["+neon"]}}

ABI to LLVM triple (Android NDK ``docs/BuildSystemMaintainers.md``, "Target
Triples"): ``arm64-v8a`` is ``aarch64-linux-android``, ``armeabi-v7a`` is
``armv7a-linux-androideabi``, ``x86`` is ``i686-linux-android``, ``x86_64`` is
``x86_64-linux-android``; each is linked with the NDK's clang.

A GPU target carries the phone's own limits (threads per work-group, shared
memory) where they were read from the phone (:func:`gpu_limit_attrs`).

A phone whose RPC server runs this host's own code gets the *host* LLVM target
(no mtriple: LLVM's default, the host's) and is linked with the host compiler.
Only farm's virtual phones do: they say so with the property
``ro.farm.host_runtime=1`` (fact ``host_runtime``). It is never guessed from
the ABI: a real x86_64 Android emulator or Chromebook runs bionic, and a glibc
``.so`` built for the host would not load there.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from farm.device.facts import gpu_limits_from
from farm.errors import PhoneFault, SpecError
from farm.jobs.params import MAX_GPU_WORK_GROUP_THREADS, DeviceFacts, DeviceKind

#: ABI -> (LLVM triple, default -mattr). NEON is mandatory on arm64 and on every
#: armeabi-v7a device Android 6+ certifies (Android CDD 3.3.1), so it is a safe default.
_ABI_TRIPLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "arm64-v8a": ("aarch64-linux-android", ("+neon",)),
    "armeabi-v7a": ("armv7a-linux-androideabi", ("+neon",)),
    "x86": ("i686-linux-android", ()),
    "x86_64": ("x86_64-linux-android", ()),
}

#: GPU name fragment (lower case) -> TVM OpenCL ``device`` attribute.
_OPENCL_DEVICES: tuple[tuple[str, str], ...] = (
    ("mali", "mali"),
    ("arm", "mali"),
    ("adreno", "adreno"),
    ("qualcomm", "adreno"),
)


def device_facts(serial: str, facts: Mapping[str, Any]) -> DeviceFacts:
    """The jobs' view of a phone from the facts the fleet stored (``devices.facts``).

    Raises:
        PhoneFault: the phone's ABI is unknown (its facts were never read).
    """
    abis = list(facts.get("abis") or [])
    abi = facts.get("abi") or (abis[0] if abis else None)
    if not abi:
        raise PhoneFault(serial, "no ABI in the phone's facts; it was never set up")
    return DeviceFacts(
        abi=str(abi),
        gpu=str(facts.get("gpu") or ""),
        has_opencl=bool(facts.get("has_opencl", False)),
        has_vulkan=bool(facts.get("has_vulkan", False)),
        cpu_features=tuple(facts.get("cpu_features") or ()),
        num_cores=int(facts.get("num_cores") or 0),
        gpu_limits=gpu_limits_from(facts.get("gpu_limits")),
        host_runtime=facts.get("host_runtime") is True,
    )


def cpu_target(facts: DeviceFacts) -> dict[str, Any]:
    """The LLVM target for the phone's CPU.

    Args:
        facts: the phone's facts; ``abi`` must be a known Android ABI unless
            ``host_runtime`` (the phone runs host code: the host's target).

    Returns:
        A target dict, e.g. ``{"kind": "llvm", "mtriple": "aarch64-linux-android",
        "mattr": ["+neon"], "num-cores": 8}``.

    Raises:
        SpecError: the ABI is unknown.
    """
    target: dict[str, Any] = {"kind": "llvm"}
    if not facts.host_runtime:
        if facts.abi not in _ABI_TRIPLES:
            known = ", ".join(_ABI_TRIPLES)
            raise SpecError("device.abi", f"unknown ABI {facts.abi!r}; known: {known}")
        triple, default_mattr = _ABI_TRIPLES[facts.abi]
        target["mtriple"] = triple
        mattr = list(dict.fromkeys([*default_mattr, *facts.cpu_features]))
        if mattr:
            target["mattr"] = mattr
    elif facts.cpu_features:
        target["mattr"] = list(facts.cpu_features)
    elif host_features := host_vector_features():
        target["mattr"] = host_features
    if facts.num_cores > 0:
        # MetaSchedule's CPU rules read num-cores to size parallel loops.
        target["num-cores"] = facts.num_cores
    return target


#: /proc/cpuinfo flag -> LLVM feature, for the x86 vector extensions LLVM does not assume
#: without ``-mcpu`` (its default x86-64 CPU has SSE2 only).
_X86_VECTOR_FLAGS = {
    "sse4_2": "+sse4.2", "avx": "+avx", "avx2": "+avx2", "fma": "+fma", "f16c": "+f16c",
    "avx512f": "+avx512f", "avx512bw": "+avx512bw", "avx512dq": "+avx512dq",
    "avx512vl": "+avx512vl", "avx512cd": "+avx512cd",
}


def host_vector_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """The host's x86 vector extensions as LLVM ``mattr`` entries (empty elsewhere).

    A phone that runs host code (a virtual phone) runs on this CPU; without
    them LLVM compiles for the baseline x86-64 (SSE2, 4 floats a vector) while
    onnxruntime, timed beside it, picks AVX2 or AVX-512 at run time. Read from
    ``/proc/cpuinfo`` rather than from LLVM so that asking for a target needs
    no TVM import.
    """
    try:
        text = cpuinfo.read_text()
    except OSError:
        return []
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            return [feature for flag, feature in _X86_VECTOR_FLAGS.items() if flag in flags]
    return []


def opencl_device(gpu: str) -> str | None:
    """TVM's OpenCL ``device`` name for a GPU name, or None if TVM has no special one.

    Args:
        gpu: GL renderer or vendor, e.g. ``"Mali-G710"``, ``"Adreno (TM) 740"``.
    """
    lowered = gpu.lower()
    for fragment, device in _OPENCL_DEVICES:
        if fragment in lowered:
            return device
    return None


def target_for(facts: DeviceFacts, device: DeviceKind = DeviceKind.CPU) -> dict[str, Any]:
    """The compile target for one processor of a phone, with the host set for GPUs.

    Args:
        facts: the phone's facts.
        device: which processor runs the kernels.

    Returns:
        A dict that ``tvm.target.Target`` accepts.

    Raises:
        SpecError: the ABI is unknown, or the phone lacks the requested GPU API.
    """
    host = cpu_target(facts)
    if device is DeviceKind.CPU:
        return host
    if device is DeviceKind.OPENCL:
        if not facts.has_opencl:
            raise SpecError("params.device", "the phone has no OpenCL driver")
        target: dict[str, Any] = {"kind": "opencl", "host": host}
        name = opencl_device(facts.gpu)
        if name is not None:
            target["device"] = name
        return target | gpu_limit_attrs(facts.gpu_limits.get("opencl", {}))
    if device is DeviceKind.VULKAN:
        if not facts.has_vulkan:
            raise SpecError("params.device", "the phone has no Vulkan driver")
        limits = gpu_limit_attrs(facts.gpu_limits.get("vulkan", {}))
        return {"kind": "vulkan", "host": host} | limits
    raise SpecError("params.device", f"unknown device kind {device!r}")


def gpu_limit_attrs(limits: Mapping[str, int]) -> dict[str, int]:
    """Target attributes from a phone's limits for one GPU API.

    TVM's ``opencl`` and ``vulkan`` target kinds default to 256 threads per
    work-group (``max_threads_per_block``, ``max_num_threads``); MetaSchedule's
    GPU rules and TVM's thread binding read these attributes, so a phone's real
    limits replace the defaults. An absent limit keeps TVM's default.

    Args:
        limits: one API's entry of ``DeviceFacts.gpu_limits``.

    Returns:
        E.g. ``{"max_threads_per_block": 1024, "max_num_threads": 1024,
        "thread_warp_size": 1, "max_shared_memory_per_block": 32768}``.
    """
    attrs: dict[str, int] = {}
    if threads := limits.get("max_threads_per_block"):
        attrs["max_threads_per_block"] = threads
        attrs["max_num_threads"] = threads
    if warp := limits.get("warp_size"):
        attrs["thread_warp_size"] = warp
    if shared := limits.get("max_shared_memory_per_block"):
        attrs["max_shared_memory_per_block"] = shared
    return attrs


def cuda_target(arch: str, limits: Mapping[str, int]) -> dict[str, Any]:
    """The target of an NVIDIA GPU host's GPU (:mod:`farm.controllers.gpu`).

    Args:
        arch: the GPU's ``sm_XY`` from its compute capability, e.g. ``"sm_90"``.
        limits: its CUDA limits (``max_threads_per_block``, ``warp_size``,
            ``max_shared_memory_per_block``), as :func:`gpu_limit_attrs` reads them.

    Returns:
        E.g. ``{"kind": "cuda", "arch": "sm_90", "max_threads_per_block": 1024, ...,
        "host": {"kind": "llvm"}}``: the host code is this host's own (the GPU's
        RPC server runs here), linked with the host compiler.
    """
    return {"kind": "cuda", "arch": arch, "host": {"kind": "llvm"}} | gpu_limit_attrs(limits)


def work_group_limit(target: dict[str, Any]) -> int:
    """Threads one work-group of a GPU target may hold.

    The phone's limit where it was read (:func:`gpu_limit_attrs`), else
    :data:`MAX_GPU_WORK_GROUP_THREADS`.
    """
    return int(target.get("max_threads_per_block", MAX_GPU_WORK_GROUP_THREADS))


def host_of(target: dict[str, Any]) -> dict[str, Any]:
    """The CPU part of a target: its ``host`` for GPU targets, else the target itself."""
    host = target.get("host")
    return host if isinstance(host, dict) else target


def needs_ndk(target: dict[str, Any]) -> bool:
    """Whether the target's libraries must be linked with the Android NDK."""
    return "android" in str(host_of(target).get("mtriple", ""))


def runtime_device_name(target: dict[str, Any]) -> str:
    """The TVM runtime device name of a target: ``"cpu"`` or the GPU kind (``"cuda"``...)."""
    kind = str(target["kind"])
    return "cpu" if kind == "llvm" else kind


def shared_target(targets: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The one target the phones of a tuning job share.

    MetaSchedule measures each candidate on whichever phone of the job's key is
    free and keeps one database for one target, so the phones must agree on
    every fact that decides it (ABI, CPU features, cores, GPU and its limits).

    Args:
        targets: serial -> that phone's target, from :func:`target_for`; not empty.

    Returns:
        The target, when all are equal.

    Raises:
        PhoneFault: the targets differ; the message names each differing
            attribute and every phone's value, e.g. ``num-cores: 8 on A, 4 on B``.
    """
    first = next(iter(targets.values()))
    if all(target == first for target in targets.values()):
        return first
    flat = {serial: _flatten(target) for serial, target in targets.items()}
    names = sorted({name for values in flat.values() for name in values})
    differing = []
    for name in names:
        values = {serial: values.get(name) for serial, values in flat.items()}
        if len({repr(value) for value in values.values()}) > 1:
            each = ", ".join(f"{'unset' if v is None else v} on {s}" for s, v in values.items())
            differing.append(f"{name}: {each}")
    raise PhoneFault(",".join(targets), "the phones of one tuning job must share its target; "
                                        "they differ in " + "; ".join(differing))


def _flatten(target: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in target.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat
