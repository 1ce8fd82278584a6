"""NVIDIA GPUs of this host behind the device-controller seam (kind ``gpu``).

* discovery and facts: NVML (:mod:`farm.gpu.nvml`): one device per GPU named in
  ``[gpu] gpus`` (all when empty), serial = its NVML UUID in lower case
  (``gpu-5c3f6d1e-...``), unique across hosts;
* health and thermal gating: NVML's temperature (gated by ``[gpu] temp_max_c``),
  heat clock event ("throttle") reasons, clocks, memory and power, as the
  readings :data:`~farm.health.kind_readings.GPU_READINGS` declares;
* the RPC server: farm's (:mod:`farm.gpu.server`: TVM's listen loop, each
  session served in the server's own process, and why), one per GPU, with
  ``CUDA_VISIBLE_DEVICES`` set to the GPU's UUID, in its own process group that
  :meth:`GpuController.stop_server` ends and that ends itself with farmd;
* recovery: restart the server (``restart_app``); a GPU is not rebooted by farm;
* compile target: ``cuda`` with the GPU's ``arch`` (``sm_90``) and limits, the
  host's LLVM for the host code (:func:`farm.jobs.targets.cuda_target`).

The NVML reader is a service (``services["nvml"]``), so tests replay readings
recorded on a real GPU (``tests/fixtures/nvml``) and need no GPU.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from farm.clock import wait_until
from farm.controllers.base import (
    GPU,
    ControllerContext,
    Discovered,
    HealthReading,
    RecoveryStep,
    TargetSpec,
    ThermalReading,
)
from farm.errors import PhoneFault, SpecError
from farm.gpu.nvml import GpuReading, NvmlReader, PynvmlReader, parse
from farm.gpu.server import server_argv
from farm.health.readings import declared
from farm.health.sample import ADB_STATE_DEVICE
from farm.netaddr import free_port
from farm.procs import group_alive, signal_group, spawn

__all__ = ["KIND", "GpuController"]

log = structlog.get_logger(__name__)

KIND = GPU
#: A GPU NVML no longer lists (fallen off the bus, driver reloaded): adb's word.
ABSENT = "absent"
#: How long a stopped server's group gets after SIGTERM before SIGKILL.
STOP_GRACE_S = 5.0
#: CUDA limits every GPU since compute capability 2.0 has (CUDA C Programming
#: Guide, "Technical Specifications per Compute Capability"): threads per block,
#: warp size and the static shared memory per block.
CUDA_LIMITS: dict[str, int] = {"max_threads_per_block": 1024, "warp_size": 32,
                               "max_shared_memory_per_block": 48 * 1024}


class GpuController:
    """This host's NVIDIA GPUs; see the module docstring. Thread-safe.

    Args:
        settings: farm's settings (``gpu`` section, ``tracker`` for the servers).
        reader: where NVML readings come from.
        log_dir: where each server's output goes (``gpu-<serial>.log``); None discards it.
    """

    kind = KIND

    def __init__(self, settings: Any, reader: NvmlReader, log_dir: Path | None = None) -> None:
        self.settings = settings
        self.gpu = settings.gpu
        self.reader = reader
        self.log_dir = log_dir
        self._lock = threading.Lock()
        self._servers: dict[str, subprocess.Popen[bytes]] = {}
        self._keys: dict[str, str] = {}  # serial -> the key served, where not its own

    @classmethod
    def from_context(cls, context: ControllerContext) -> GpuController:
        """Build from farm's settings; ``services["nvml"]`` replaces the NVML reader.

        Raises:
            ConfigError: no settings were given.
        """
        settings = context.require_settings(cls.kind)
        reader = context.services.get("nvml") or PynvmlReader()
        log_dir = context.services.get("log_dir")
        return cls(settings, reader, Path(log_dir) if log_dir else None)

    # -- NVML -------------------------------------------------------------

    def _wanted(self, reading: GpuReading) -> bool:
        chosen = self.gpu.gpus
        return not chosen or str(reading.index) in chosen or reading.uuid in chosen

    def readings(self) -> dict[str, GpuReading]:
        """serial -> the latest reading of every GPU this farm serves.

        Raises:
            InfraFault: NVML failed. ToolMissing: nvidia-ml-py is not installed.
        """
        return {serial_of(r): r for r in parse(self.reader.read()) if self._wanted(r)}

    def _reading(self, serial: str) -> GpuReading | None:
        return self.readings().get(serial)

    # -- DeviceController -------------------------------------------------

    def discover(self) -> list[Discovered]:
        """Every served GPU NVML lists, in state ``device``; none while ``[gpu] enabled`` is off.

        farmd builds a controller of every registered kind, so a host without
        GPUs (or without nvidia-ml-py) must not touch NVML here.

        Raises:
            InfraFault: NVML failed. ToolMissing: nvidia-ml-py is not installed.
        """
        if not self.gpu.enabled:
            return []
        return [Discovered(serial, ADB_STATE_DEVICE) for serial in self.readings()]

    def facts(self, serial: str) -> dict[str, Any]:
        """Name, compute capability, memory, driver and CUDA version of the GPU.

        Keys: ``gpu`` (name), ``uuid``, ``index``, ``compute_capability``
        (``"9.0"``), ``arch`` (``"sm_90"``), ``memory_total_mb``,
        ``driver_version``, ``cuda_version``, ``has_cuda``, ``gpu_limits``
        (``{"cuda": CUDA_LIMITS}``), and the host's ``abi`` (``uname -m``),
        ``num_cores`` and ``host_runtime`` (the server runs this host's code).

        Raises:
            PhoneFault: NVML no longer lists the GPU.
        """
        reading = self._reading(serial)
        if reading is None:
            raise PhoneFault(serial, "NVML no longer lists this GPU")
        major, minor = reading.compute_capability
        return {
            "kind": KIND,
            "gpu": reading.name,
            "uuid": reading.uuid,
            "index": reading.index,
            "compute_capability": f"{major}.{minor}",
            "arch": reading.arch,
            "memory_total_mb": round(reading.memory_total_mb),
            "driver_version": reading.driver_version,
            "cuda_version": reading.cuda_version,
            "has_cuda": True,
            "gpu_limits": {"cuda": dict(CUDA_LIMITS)},
            "abi": platform.machine(),
            "num_cores": os.cpu_count() or 0,
            "host_runtime": True,
        }

    def read_health(self, serial: str, at: datetime, *,
                    registered: bool | None = None) -> HealthReading:
        """The GPU's readings (present or ``absent``) and whether its server runs."""
        sample = self.gating_reading(serial, at)
        with self._lock:
            server = self._servers.get(serial)
        running = server is not None and server.poll() is None
        return HealthReading(serial, at, sample.adb_state, kind=KIND, readings=sample.readings,
                             app_running=running, registered=registered)

    def gating_reading(self, serial: str, at: datetime) -> ThermalReading:
        """NVML's reading of the GPU as :data:`~farm.health.kind_readings.GPU_READINGS` declares.

        Never raises for a vanished GPU: it reads ``adb_state="absent"``.
        """
        reading = self._reading(serial)
        if reading is None:
            return ThermalReading(serial, at, ABSENT, kind=KIND)
        return ThermalReading(serial, at, kind=KIND, readings=declared(KIND).read(reading))

    def start_server(self, serial: str) -> None:
        """(Re)start the GPU's RPC server (:mod:`farm.gpu.server`) pointed at the tracker.

        Returns once the process runs; the caller waits for :meth:`tracker_key`
        at the tracker.

        Raises:
            PhoneFault: NVML does not list the GPU, or the server could not start.
        """
        reading = self._reading(serial)
        if reading is None:
            raise PhoneFault(serial, "NVML no longer lists this GPU")
        self.stop_server(serial)
        tracker = self.settings.tracker
        host = self.gpu.server_host
        key = self._keys.get(serial) or self.tracker_key(serial)
        argv = server_argv(tracker_host=tracker.host, tracker_port=tracker.port,
                           key=key, host=host, port=free_port(host),
                           parent_pid=os.getpid())
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": reading.uuid}
        output: Any = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            output = (self.log_dir / f"{serial}.log").open("ab")
        try:
            proc = spawn(argv, env=env, stdin=subprocess.DEVNULL, stdout=output,
                         stderr=subprocess.STDOUT)
        except OSError as exc:
            raise PhoneFault(serial, f"the RPC server did not start: {exc}") from exc
        finally:
            if output is not subprocess.DEVNULL:
                output.close()
        with self._lock:
            self._servers[serial] = proc
        log.info("gpu_server_started", serial=serial, key=key, pid=proc.pid)

    def serve(self, serial: str, key: str) -> None:
        """Restart the GPU's RPC server under ``key``; later starts keep it.

        Raises:
            PhoneFault: as :meth:`start_server`.
        """
        with self._lock:
            self._keys[serial] = key
        self.start_server(serial)

    def stop_server(self, serial: str) -> None:
        """SIGTERM the server's process group, SIGKILL it after a grace; never raises."""
        with self._lock:
            proc = self._servers.pop(serial, None)
        if proc is None:
            return
        signal_group(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_S)
        signal_group(proc.pid, signal.SIGKILL)  # popen_workers outlive a SIGTERM'd parent
        proc.wait()
        wait_until(lambda: not group_alive(proc.pid), STOP_GRACE_S)
        log.info("gpu_server_stopped", serial=serial, pid=proc.pid)

    def server_pid(self, serial: str) -> int | None:
        """The running server's pid (its process group id), or None."""
        with self._lock:
            proc = self._servers.get(serial)
        return proc.pid if proc is not None and proc.poll() is None else None

    def close(self) -> None:
        """Stop every server this controller started."""
        with self._lock:
            serials = list(self._servers)
        for serial in serials:
            self.stop_server(serial)

    def recovery_steps(self, serial: str) -> list[RecoveryStep]:
        """Restart the server (``restart_app``); nothing harsher is farm's to do to a GPU."""
        return [RecoveryStep("restart_app", lambda: self.start_server(serial))]

    def compile_target(self, facts: Mapping[str, Any], device: str = "cpu") -> TargetSpec:
        """``cuda`` for the GPU (arch and limits from its facts), or the host's LLVM.

        Raises:
            SpecError: ``device`` is neither ``cuda`` nor ``cpu``.
            PhoneFault: the facts have no ``arch`` (never read).
            ToolMissing: the host has no C++ compiler to link the library.
        """
        from farm.jobs.ndk import linker_for
        from farm.jobs.targets import cuda_target

        if device not in ("cuda", "cpu"):
            raise SpecError("params.device", f"a GPU host has no {device!r} device; "
                                             "use cuda (or cpu)")
        host: dict[str, Any] = {"kind": "llvm"}
        if device == "cpu":
            return TargetSpec(host, host, linker_for(host))
        arch = facts.get("arch")
        if not arch:
            raise PhoneFault(str(facts.get("uuid") or "gpu"), "no arch in the GPU's facts")
        limits = (facts.get("gpu_limits") or {}).get("cuda", CUDA_LIMITS)
        target = cuda_target(str(arch), limits)
        return TargetSpec(target, host, linker_for(target))

    def tracker_key(self, serial: str) -> str:
        """``<[gpu] key_prefix>-<first 8 hex digits of the UUID>``, e.g. ``gpu-5c3f6d1e``."""
        return f"{self.gpu.key_prefix}-{serial.removeprefix('gpu-')[:8]}"


def serial_of(reading: GpuReading) -> str:
    """A GPU's serial: its NVML UUID in lower case (``GPU-5C3F...`` -> ``gpu-5c3f...``)."""
    return reading.uuid.lower()
