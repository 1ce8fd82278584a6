"""NVIDIA GPUs as NVML sees them: raw readings in, typed readings out.

Two halves, so that CI (no GPU) tests everything but the NVML calls:

* a **reader** (:class:`NvmlReader`) returns one raw reading of every GPU of the
  host as plain JSON-ready data (:data:`RawReading`). :class:`PynvmlReader` asks
  NVML through ``nvidia-ml-py`` (import name ``pynvml``, extra ``gpu``);
  :class:`RecordedReader` replays readings recorded on a real GPU host
  (``tests/fixtures/nvml/*.json``, recorded with :func:`record`);
* a pure **parser** (:func:`parse`) turns a raw reading into :class:`GpuReading`
  values, and :func:`throttle_reasons` names the set bits of NVML's clock event
  reasons.

Units are NVML's own in the raw reading (bytes, milliwatts, MHz, °C, a bit mask)
and farm's in :class:`GpuReading` (MiB, W, MHz, °C, names). A field NVML does not
support on a GPU (``NVMLError_NotSupported``) is ``None`` in both.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from farm.errors import ConfigError, InfraFault, ToolMissing

__all__ = [
    "THROTTLE_REASON_BITS",
    "GpuReading",
    "NvmlReader",
    "PynvmlReader",
    "RawReading",
    "RecordedReader",
    "parse",
    "record",
    "throttle_reasons",
]

#: One reading of every GPU of a host, as JSON: ``{"driver_version": "580.159.04",
#: "cuda_driver_version": 13000, "gpus": [{"index": 0, "uuid": "GPU-...", ...}]}``;
#: the per-GPU keys are those :func:`_read_gpu` fills.
RawReading = dict[str, Any]

#: NVML's clock event ("throttle") reason bits -> farm's names. Source: ``nvml.h``
#: of the CUDA toolkit, ``nvmlClocksEventReason*`` (formerly
#: ``nvmlClocksThrottleReason*``), e.g. ``nvmlClocksEventReasonSwThermalSlowdown
#: 0x0000000000000020ULL``.
THROTTLE_REASON_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

#: Reasons that mean the GPU is slowed by heat or its power supply: a measured run
#: would be skewed, so thermal gating waits them out. ``gpu_idle``,
#: ``applications_clocks_setting``, ``sync_boost`` and ``display_clock_setting`` are
#: not heat; ``sw_power_cap`` is the normal state of a GPU at full load (it runs at
#: its power limit) and would hold every busy GPU back.
HEAT_REASONS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                          "hw_power_brake_slowdown"})


def throttle_reasons(mask: int | None) -> tuple[str, ...]:
    """The names of the reason bits set in ``mask``, lowest bit first.

    Unknown bits are named ``bit_0x...`` rather than dropped. ``None`` (not read)
    gives ``()``.
    """
    if not mask:
        return ()
    names = []
    bit = 1
    while bit <= mask:
        if mask & bit:
            names.append(THROTTLE_REASON_BITS.get(bit, f"bit_{bit:#x}"))
        bit <<= 1
    return tuple(names)


@dataclass(frozen=True)
class GpuReading:
    """One NVIDIA GPU at one instant.

    Attributes:
        index: NVML's index (the order ``CUDA_VISIBLE_DEVICES`` numbers by PCI bus
            when ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; farm pins GPUs by UUID instead).
        uuid: NVML's UUID, e.g. ``"GPU-5c3f6d1e-..."``; stable across reboots.
        name: product name, e.g. ``"NVIDIA H100 80GB HBM3"``.
        compute_capability: ``(major, minor)``, e.g. ``(9, 0)`` (``sm_90``).
        memory_total_mb: device memory, MiB.
        memory_used_mb: device memory in use, MiB.
        temp_c: GPU core temperature, °C.
        slowdown_temp_c: the temperature at which the GPU starts slowing itself
            (NVML ``NVML_TEMPERATURE_THRESHOLD_SLOWDOWN``), °C; None if not read.
        sm_clock_mhz: current SM clock.
        mem_clock_mhz: current memory clock.
        max_sm_clock_mhz: the highest SM clock the GPU allows.
        power_w: current board power draw, W.
        power_limit_w: the enforced power limit, W.
        utilization_pct: GPU busy percentage over NVML's last sample period.
        throttle_reasons: names of the clock event reasons in force
            (:data:`THROTTLE_REASON_BITS`).
        driver_version: the NVIDIA driver, e.g. ``"580.159.04"``.
        cuda_version: the highest CUDA version the driver supports, e.g. ``"13.0"``.
    """

    index: int
    uuid: str
    name: str
    compute_capability: tuple[int, int]
    memory_total_mb: float
    memory_used_mb: float | None = None
    temp_c: float | None = None
    slowdown_temp_c: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    utilization_pct: int | None = None
    throttle_reasons: tuple[str, ...] = ()
    driver_version: str = ""
    cuda_version: str = ""

    @property
    def arch(self) -> str:
        """TVM's CUDA ``arch`` for this GPU, e.g. ``"sm_90"``."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def heat_reasons(self) -> tuple[str, ...]:
        """The throttle reasons in force that come from heat or power (:data:`HEAT_REASONS`)."""
        return tuple(r for r in self.throttle_reasons if r in HEAT_REASONS)


_MIB = 1024 * 1024


def _opt_float(value: Any, scale: float = 1.0) -> float | None:
    return None if value is None else float(value) / scale


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def cuda_version_text(version: int | None) -> str:
    """NVML's CUDA driver version integer as text: 13000 -> ``"13.0"``, 12040 -> ``"12.4"``.

    NVML encodes it as ``1000 * major + 10 * minor`` (``nvmlSystemGetCudaDriverVersion``,
    the same encoding as ``cudaDriverGetVersion``).
    """
    if not version:
        return ""
    return f"{version // 1000}.{(version % 1000) // 10}"


def parse(raw: Mapping[str, Any]) -> list[GpuReading]:
    """Typed readings of every GPU in one raw reading; pure.

    Args:
        raw: from a :class:`NvmlReader` (see :data:`RawReading`).

    Returns:
        One reading per GPU, in NVML's index order.

    Raises:
        InfraFault: the reading lacks a GPU's identity (uuid, name, compute
            capability or memory total): it did not come from NVML.
    """
    driver = str(raw.get("driver_version") or "")
    cuda = cuda_version_text(raw.get("cuda_driver_version"))
    readings = []
    for gpu in raw.get("gpus", []):
        try:
            major, minor = gpu["compute_capability"]
            reading = GpuReading(
                index=int(gpu["index"]),
                uuid=str(gpu["uuid"]),
                name=str(gpu["name"]),
                compute_capability=(int(major), int(minor)),
                memory_total_mb=float(gpu["memory_total_bytes"]) / _MIB,
                memory_used_mb=_opt_float(gpu.get("memory_used_bytes"), _MIB),
                temp_c=_opt_float(gpu.get("temp_c")),
                slowdown_temp_c=_opt_float(gpu.get("slowdown_temp_c")),
                sm_clock_mhz=_opt_int(gpu.get("sm_clock_mhz")),
                mem_clock_mhz=_opt_int(gpu.get("mem_clock_mhz")),
                max_sm_clock_mhz=_opt_int(gpu.get("max_sm_clock_mhz")),
                power_w=_opt_float(gpu.get("power_mw"), 1000.0),
                power_limit_w=_opt_float(gpu.get("power_limit_mw"), 1000.0),
                utilization_pct=_opt_int(gpu.get("utilization_pct")),
                throttle_reasons=throttle_reasons(gpu.get("clock_event_reasons")),
                driver_version=driver,
                cuda_version=cuda,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InfraFault(f"unreadable NVML reading of a GPU: {exc!r} in {gpu!r}") from exc
        readings.append(reading)
    return sorted(readings, key=lambda r: r.index)


class NvmlReader(Protocol):
    """Where raw NVML readings come from. Implementations are thread-safe."""

    def read(self) -> RawReading:
        """One reading of every GPU of the host.

        Raises:
            InfraFault: NVML failed (driver gone, GPU fallen off the bus).
        """
        ...


class PynvmlReader:
    """Reads NVML through ``nvidia-ml-py``; NVML is initialised once, on first use.

    Raises (from :meth:`read`):
        ToolMissing: ``nvidia-ml-py`` is not installed (``pip install farm[gpu]``).
        InfraFault: NVML could not start (no NVIDIA driver) or a call failed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nvml: Any = None

    def _init(self) -> Any:
        if self._nvml is None:
            try:
                import pynvml
            except ImportError as exc:
                raise ToolMissing("pynvml", "pip install 'farm[gpu]' (nvidia-ml-py)") from exc
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as exc:
                raise InfraFault(f"NVML did not start (no NVIDIA driver?): {exc}") from exc
            self._nvml = pynvml
        return self._nvml

    def read(self) -> RawReading:
        """One reading of every GPU (see :class:`NvmlReader`)."""
        with self._lock:
            nvml = self._init()
            try:
                count = nvml.nvmlDeviceGetCount()
                return {
                    "driver_version": _text(nvml.nvmlSystemGetDriverVersion()),
                    "cuda_driver_version": nvml.nvmlSystemGetCudaDriverVersion(),
                    "gpus": [_read_gpu(nvml, i) for i in range(count)],
                }
            except nvml.NVMLError as exc:
                raise InfraFault(f"NVML reading failed: {exc}") from exc


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _read_gpu(nvml: Any, index: int) -> dict[str, Any]:
    """One GPU's raw fields; a field the GPU does not support is None."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)

    def optional(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except nvml.NVMLError_NotSupported:
            return None

    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    # nvmlDeviceGetCurrentClocksEventReasons replaced ...ThrottleReasons in newer NVML.
    reasons_call = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons",
                           getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
    return {
        "index": index,
        "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
        "name": _text(nvml.nvmlDeviceGetName(handle)),
        "compute_capability": list(nvml.nvmlDeviceGetCudaComputeCapability(handle)),
        "memory_total_bytes": int(memory.total),
        "memory_used_bytes": int(memory.used),
        "temp_c": optional(lambda: nvml.nvmlDeviceGetTemperature(handle,
                                                                 nvml.NVML_TEMPERATURE_GPU)),
        "slowdown_temp_c": optional(lambda: nvml.nvmlDeviceGetTemperatureThreshold(
            handle, nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)),
        "sm_clock_mhz": optional(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        "mem_clock_mhz": optional(lambda: nvml.nvmlDeviceGetClockInfo(handle,
                                                                      nvml.NVML_CLOCK_MEM)),
        "max_sm_clock_mhz": optional(lambda: nvml.nvmlDeviceGetMaxClockInfo(handle,
                                                                            nvml.NVML_CLOCK_SM)),
        "power_mw": optional(lambda: nvml.nvmlDeviceGetPowerUsage(handle)),
        "power_limit_mw": optional(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle)),
        "utilization_pct": optional(lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        "clock_event_reasons": None if reasons_call is None else optional(
            lambda: reasons_call(handle)),
    }


class RecordedReader:
    """Replays recorded raw readings in order, then keeps returning the last one.

    The file holds ``{"source": "<where and how it was recorded>", "readings":
    [RawReading, ...]}`` (written by :func:`record`).

    Raises (from the constructor):
        ConfigError: the file is missing or not such a recording.
    """

    def __init__(self, readings: Sequence[RawReading]) -> None:
        if not readings:
            raise ConfigError("nvml recording", "holds no readings")
        self._readings = list(readings)
        self._next = 0
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path) -> RecordedReader:
        """The recording in ``path`` (see the class doc)."""
        try:
            data = json.loads(path.read_text())
            return cls(data["readings"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError("nvml recording", f"{path}: {exc}") from exc

    def read(self) -> RawReading:
        """The next recorded reading (see :class:`NvmlReader`)."""
        with self._lock:
            reading = self._readings[min(self._next, len(self._readings) - 1)]
            self._next += 1
            return reading


def record(reader: NvmlReader, count: int, source: str,
           pause: Callable[[], None]) -> dict[str, Any]:
    """Record ``count`` raw readings for :class:`RecordedReader`.

    Args:
        reader: usually :class:`PynvmlReader` on a real GPU host.
        count: readings to take.
        source: where and how they were taken (machine, driver, load), kept in the file.
        pause: called between readings (the caller's load or wait).

    Returns:
        ``{"source": source, "readings": [...]}``, ready for ``json.dump``.
    """
    readings = []
    for i in range(count):
        if i:
            pause()
        readings.append(reader.read())
    return {"source": source, "readings": readings}
