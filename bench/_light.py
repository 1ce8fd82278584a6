"""The scale bench's light device kind: many stand-in devices that cost a host almost nothing.

Marked so everywhere: the kind is ``light``, each serial ``light-<host>-<n>``,
and its facts carry ``"light": true`` and model ``light stand-in``. It is
registered only inside the scale bench's own processes, through the
``sitecustomize`` that ``bench_scale.py`` puts on their ``PYTHONPATH`` (farmd,
its zygote and attempt children all need the kind, and each is a new
interpreter); a user's farm never sees it.

What a light device does:

* discovery: ``$LIGHT_BENCH_DEVICES`` devices, always in state ``device``;
* facts and health: answered from memory (no I/O): a ready device with no
  readings to judge, so a health sweep costs farm only its own work per device;
* its "RPC server": a registration at this host's tracker, one tracker connection
  per device as the TVM server makes (``UPDATE_INFO`` then ``PUT`` of the key,
  again whenever a client took it; apache/tvm ``python/tvm/rpc/server.py``,
  ``_listen_loop``), whose address is the host's one real ``tvm.exec.rpc_server``
  (``$LIGHT_BENCH_RPC_PORT``, started with ``--key light`` and no tracker,
  so it accepts the matchkey ``light`` each registration puts). A job on a
  light device so runs on the host's CPU, through a real RPC session;
* only the first ``$LIGHT_BENCH_RUNNERS`` devices of a host have SoC
  ``light-runner``, which the bench's jobs ask for: a 2-core host cannot run
  an attempt child for each of hundreds of devices at once.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from farm.controllers.base import (
    ControllerContext,
    Discovered,
    HealthReading,
    RecoveryStep,
    TargetSpec,
    ThermalReading,
    register,
)
from farm.errors import PhoneFault
from farm.health.sample import ADB_STATE_DEVICE, HealthSample
from farm.tvm import protocol
from farm.tvm.protocol import TrackerCode

KIND = "light"
#: The matchkey every registration puts: the host's rpc_server runs with ``--key light``.
MATCHKEY = "light"
RUNNER_SOC = "light-runner"
_CALL_TIMEOUT_S = 10.0
_RECHECK_S = 1.0


class _Registrar:
    """One tracker connection per served device, put again once a client took its entry."""

    def __init__(self, tracker: tuple[str, int], rpc_port: int) -> None:
        self.tracker = tracker
        self.rpc_port = rpc_port
        self.lock = threading.Lock()
        self.conns: dict[str, tuple[str, socket.socket]] = {}
        threading.Thread(target=self._loop, name="light-registrar", daemon=True).start()

    def _call(self, sock: socket.socket, message: list[Any]) -> Any:
        return protocol.call(sock, message, time.monotonic() + _CALL_TIMEOUT_S)

    def serve(self, serial: str, key: str) -> None:
        self.drop(serial)
        try:
            sock = protocol.open_tracker(*self.tracker, time.monotonic() + _CALL_TIMEOUT_S)
            info = {"key": f"server:{key}", "addr": [None, self.rpc_port]}
            if self._call(sock, [TrackerCode.UPDATE_INFO.value, info]) != TrackerCode.SUCCESS:
                raise PhoneFault(serial, "the tracker refused the light device's info")
            self._put(sock, key)
        except (OSError, protocol.FrameError) as exc:
            raise PhoneFault(serial, f"tracker unreachable: {exc}") from exc
        with self.lock:
            self.conns[serial] = (key, sock)

    def _put(self, sock: socket.socket, key: str) -> None:
        self._call(sock, [TrackerCode.PUT.value, key, [self.rpc_port, MATCHKEY], None])

    def drop(self, serial: str) -> None:
        with self.lock:
            entry = self.conns.pop(serial, None)
        if entry is not None:
            entry[1].close()

    def _loop(self) -> None:
        while True:
            time.sleep(_RECHECK_S)
            with self.lock:
                served = list(self.conns.items())
            for serial, (key, sock) in served:
                try:
                    pending = self._call(sock, [TrackerCode.GET_PENDING_MATCHKEYS.value])
                    if MATCHKEY not in pending:
                        self._put(sock, key)
                except (OSError, protocol.FrameError):
                    self.drop(serial)  # the next sweep sees it unregistered and heals it


class LightController:
    """This host's light devices; see the module docstring. Thread-safe."""

    kind = KIND

    def __init__(self, host: str, count: int, runners: int, tracker: tuple[str, int],
                 rpc_port: int) -> None:
        self.serials = [f"light-{host}-{i:03d}" for i in range(count)]
        self.runners = set(self.serials[:runners])
        self.tracker = tracker
        self.rpc_port = rpc_port
        self._registrar: _Registrar | None = None
        self._keys: dict[str, str] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_context(cls, context: ControllerContext) -> LightController:
        settings = context.settings
        host = settings.host_id if settings is not None else socket.gethostname()
        port = settings.tracker.port if settings is not None else 9190
        return cls(host.replace(".", "-"), int(os.environ.get("LIGHT_BENCH_DEVICES", "0")),
                   int(os.environ.get("LIGHT_BENCH_RUNNERS", "0")), ("127.0.0.1", port),
                   int(os.environ.get("LIGHT_BENCH_RPC_PORT", "0")))

    def _registrar_started(self) -> _Registrar:
        with self._lock:
            if self._registrar is None:
                self._registrar = _Registrar(self.tracker, self.rpc_port)
            return self._registrar

    def discover(self) -> list[Discovered]:
        return [Discovered(s, ADB_STATE_DEVICE) for s in self.serials]

    def facts(self, serial: str) -> dict[str, Any]:
        return {"abi": "x86_64", "abis": ["x86_64"], "model": "light stand-in", "sdk": 0,
                "soc": RUNNER_SOC if serial in self.runners else "light", "num_cores": 1,
                "gpu": "", "has_opencl": False, "has_vulkan": False, "light": True}

    def read_health(self, serial: str, at: datetime, *,
                    registered: bool | None = None) -> HealthReading:
        with self._lock:
            running = self._registrar is not None and serial in self._keys
        return HealthSample(serial, at, kind=KIND, app_running=running, registered=registered,
                            plugged=True, screen_on=True)

    def start_server(self, serial: str) -> None:
        self.serve(serial, self.tracker_key(serial))

    def serve(self, serial: str, key: str) -> None:
        self._registrar_started().serve(serial, key)
        with self._lock:
            self._keys[serial] = key

    def stop_server(self, serial: str) -> None:
        with contextlib.suppress(Exception):
            self._registrar_started().drop(serial)
            with self._lock:
                self._keys.pop(serial, None)

    def recovery_steps(self, serial: str) -> list[RecoveryStep]:
        return [RecoveryStep("restart_app", lambda: self.start_server(serial))]

    def compile_target(self, facts: Mapping[str, Any], device: str = "cpu") -> TargetSpec:  # noqa: ARG002 (the protocol's signature)
        target = {"kind": "llvm", "num-cores": 1}
        return TargetSpec(target, target)

    def gating_reading(self, serial: str, at: datetime) -> ThermalReading:
        return HealthSample(serial, at, kind=KIND)

    def tracker_key(self, serial: str) -> str:
        return serial


def install() -> None:
    """Register the light kind in this process (the bench's ``sitecustomize`` calls it)."""
    register(KIND, LightController.from_context)
