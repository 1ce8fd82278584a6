"""Devices behind farm's RPC proxy (kind ``proxy``): the iOS RPC app, a browser.

Such a device connects out to ``tvm.exec.rpc_proxy`` (:mod:`farm.tvm.proxy`);
the proxy registers the device's key at farm's tracker. This controller:

* runs the proxy when ``[proxy] enabled``: started by the first
  :meth:`ProxyController.discover` (only farmd's fleet manager discovers; an
  attempt child that builds the controller for gating starts nothing), ended by
  :meth:`ProxyController.close` and with farmd;
* makes every key the proxy registered a device, serial ``proxy-<key>``, its
  tracker key the key itself (:func:`farm.tvm.proxy.proxied_keys`);
* cannot start, stop or recover a device's server: the device runs it and
  connects by itself, so there are no recovery rungs;
* knows no compile target: an iOS device needs Xcode's toolchain and a browser
  WebAssembly, which farm does not build for (:meth:`compile_target` says so).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from farm.controllers.base import (
    PROXY,
    ControllerContext,
    Discovered,
    HealthReading,
    RecoveryStep,
    TargetSpec,
    ThermalReading,
)
from farm.errors import PhoneFault, SpecError
from farm.health.sample import ADB_STATE_DEVICE
from farm.tvm.proxy import ProxyProcess, proxied_keys
from farm.tvm.tracker import summary

__all__ = ["KIND", "SERIAL_PREFIX", "ProxyController"]

log = structlog.get_logger(__name__)

KIND = PROXY
SERIAL_PREFIX = "proxy-"


class ProxyController:
    """Devices that reach farm through its RPC proxy; see the module docstring. Thread-safe.

    Args:
        settings: farm's settings (``proxy`` and ``tracker`` sections).
        log_path: the proxy's output file; None discards it.
    """

    kind = KIND

    def __init__(self, settings: Any, log_path: Path | None = None) -> None:
        self.settings = settings
        self.log_path = log_path
        self._lock = threading.Lock()
        self._proxy: ProxyProcess | None = None

    @classmethod
    def from_context(cls, context: ControllerContext) -> ProxyController:
        """Build from farm's settings; ``services["log_dir"]`` gets the proxy's log.

        Raises:
            ConfigError: no settings were given.
        """
        settings = context.require_settings(cls.kind)
        log_dir = context.services.get("log_dir")
        return cls(settings, Path(log_dir) / "rpc_proxy.log" if log_dir else None)

    def _ensure_proxy(self) -> ProxyProcess:
        with self._lock:
            if self._proxy is None or not self._proxy.alive():
                proxy, tracker = self.settings.proxy, self.settings.tracker
                self._proxy = ProxyProcess.start(proxy.host, proxy.port,
                                                 (tracker.host, tracker.port),
                                                 web_port=proxy.web_port, log_path=self.log_path)
                log.info("rpc_proxy_started", host=proxy.host, port=proxy.port,
                         pid=self._proxy.pid)
            return self._proxy

    def close(self) -> None:
        """Stop the proxy if this controller started it; never raises."""
        with self._lock:
            proxy, self._proxy = self._proxy, None
        if proxy is not None:
            proxy.stop()
            log.info("rpc_proxy_stopped", pid=proxy.pid)

    def keys(self) -> tuple[str, ...]:
        """The keys the proxy registered at the tracker.

        Raises:
            TrackerUnreachable: the tracker did not answer.
        """
        tracker = self.settings.tracker
        return proxied_keys(summary(tracker.host, tracker.port), self.settings.proxy.port)

    def discover(self) -> list[Discovered]:
        """Start the proxy if needed; every key behind it is a device in state ``device``.

        Raises:
            TrackerUnreachable: the proxy did not start, or the tracker did not answer.
        """
        if not self.settings.proxy.enabled:
            return []
        self._ensure_proxy()
        return [Discovered(SERIAL_PREFIX + key, ADB_STATE_DEVICE) for key in self.keys()]

    def facts(self, serial: str) -> dict[str, Any]:
        """``{"kind": "proxy", "key": <tracker key>}``: all farm knows of such a device."""
        return {"kind": KIND, "key": self.tracker_key(serial), "host_runtime": False}

    def read_health(self, serial: str, at: datetime, *,
                    registered: bool | None = None) -> HealthReading:
        """Present while the proxy lists its key; the rest is unknown (None)."""
        sample = self.gating_reading(serial, at)
        return HealthReading(serial=serial, at=at, adb_state=sample.adb_state, kind=KIND,
                             registered=registered)

    def gating_reading(self, serial: str, at: datetime) -> ThermalReading:
        """No thermal reading reaches farm through the proxy: nothing holds the device back."""
        listed = self.tracker_key(serial) in self.keys()
        return ThermalReading(serial=serial, at=at, kind=KIND,
                              adb_state=ADB_STATE_DEVICE if listed else "absent")

    def start_server(self, serial: str) -> None:
        """Nothing to start: the device connects by itself.

        Raises:
            PhoneFault: the device is not connected to the proxy now.
        """
        if self.tracker_key(serial) not in self.keys():
            raise PhoneFault(serial, "not connected to farm's RPC proxy; the device must "
                                     "connect by itself (farm cannot start its server)")

    def serve(self, serial: str, key: str) -> None:
        """Only the key the device registered: farm cannot re-key a server it does not run.

        Raises:
            PhoneFault: ``key`` is not the device's own, or it is not connected.
        """
        if key != self.tracker_key(serial):
            raise PhoneFault(serial, f"a device behind the RPC proxy serves only its own key, "
                                     f"not {key!r}")
        self.start_server(serial)

    def stop_server(self, serial: str) -> None:
        """Nothing to stop: the device's server is its own."""

    def recovery_steps(self, serial: str) -> list[RecoveryStep]:  # noqa: ARG002 - protocol
        """None: farm cannot restart a server it does not run."""
        return []

    def compile_target(self, facts: Mapping[str, Any],
                       device: str = "cpu") -> TargetSpec:  # noqa: ARG002 - protocol
        """Refused: farm builds for no device behind the proxy yet (see the module docstring).

        Raises:
            SpecError: always.
        """
        raise SpecError("device.kind", f"farm cannot compile for a device behind the RPC "
                                       f"proxy ({facts.get('key', '?')}); run prebuilt "
                                       "modules with a hand script through the tracker")

    def tracker_key(self, serial: str) -> str:
        """The key the device registered through the proxy (``proxy-<key>`` -> ``<key>``)."""
        return serial.removeprefix(SERIAL_PREFIX)
