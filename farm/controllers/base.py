"""The device-controller seam: what farm asks of any kind of device, and the registry of kinds.

The final API (stable; boards and GPU hosts implement it)::

    class DeviceController(Protocol):
        kind: str                                          # "android", "board", "gpu"
        def discover(self) -> list[Discovered]             # Discovered(serial, state)
        def facts(self, serial) -> dict[str, Any]          # JSON stored as devices.facts
        def read_health(self, serial, at, *, registered=None) -> HealthReading
        def start_server(self, serial) -> None             # RPC server -> tracker, its key
        def serve(self, serial, key) -> None               # the same under ``key`` from now on
        def stop_server(self, serial) -> None              # never raises
        def recovery_steps(self, serial) -> list[RecoveryStep]   # mildest first
        def compile_target(self, facts, device="cpu") -> TargetSpec
        def gating_reading(self, serial, at) -> ThermalReading
        def tracker_key(self, serial) -> str

    class AppMemoryReader(Protocol):                       # optional: kinds that can read it
        def app_peak_memory_kb(self, serial) -> int | None   # peak RSS of the RPC session's process

    # more optional capabilities (app-death events, log tail, detach, tracked
    # kinds): farm.controllers.capabilities

    register(kind_name, factory)     # factory(ControllerContext) -> DeviceController
    controller_for(kind, context)    # a new controller of that kind
    controllers_for(context, skip)   # one of every registered kind but those skipped
    kinds()                          # the registered kind names, in registration order

farmd builds one controller of every registered kind (``controllers_for``)
and hands them to its fleet manager; a factory whose config section lists no
device returns a controller that discovers none, never raises.

Where controllers are made, and what a factory may count on:

- farmd: ``ControllerContext(settings, {"loop": LoopThread})``, one per kind
  for its whole run (the fleet manager's); phones' controller comes from the
  host's adb server (:meth:`farm.controllers.adb_host.AdbHost.android`).
- the attempt child (:mod:`farm.runner.child`): ``ControllerContext(settings)``
  with no services, for :meth:`~DeviceController.gating_reading` (once per
  attempt and kind, :class:`farm.runner.gating.ControllerGate`) and
  :meth:`~DeviceController.compile_target` (a fresh controller per call,
  :func:`farm.kinds.run.phone_target`).

So a factory must be cheap and open no connection: connect on first use.

A kind is one module (``farm/controllers/android.py``, ``board.py``, ``gpu.py``)
that implements :class:`DeviceController` and registers itself; the fleet
manager, health verdicts, scheduler, thermal gating and jobs reach a device
only through its controller, never through ``Adb`` or SSH directly. The pure
policies stay where they are and take the controller's plain data:
:func:`farm.health.verdict.verdict` judges a :data:`HealthReading`,
:func:`farm.supervise.ladder.next_step` names the rung by
:class:`~farm.supervise.ladder.Step` value, which is matched against
:attr:`RecoveryStep.name`.

Errors: every method raises only farm's errors. :class:`~farm.errors.PhoneFault`
(the device or its server failed: the caller marks it, the queue retries
elsewhere), :class:`~farm.errors.UserFault` subclasses (``ConfigError``,
``SpecError``, ``ToolMissing``: a person must act), and
:class:`~farm.errors.InfraFault` (the tracker or host side failed). Library
errors (adbutils, asyncssh, pynvml) are mapped once, inside the kind's module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from farm.errors import ConfigError
from farm.health.sample import HealthSample

if TYPE_CHECKING:
    from farm.config import Settings

__all__ = [
    "ANDROID",
    "ANY_KIND",
    "BOARD",
    "GPU",
    "PROXY",
    "AppMemoryReader",
    "ControllerContext",
    "ControllerFactory",
    "DeviceController",
    "Discovered",
    "HealthReading",
    "RecoveryStep",
    "TargetSpec",
    "ThermalReading",
    "controller_for",
    "controllers_for",
    "kinds",
    "register",
    "unregister",
]

#: A job's ``device.kind`` that any registered kind satisfies.
ANY_KIND = "any"

#: The kind of a phone (the ``devices.kind`` column's default).
ANDROID = "android"

#: A Linux board reached over SSH (one ``[[boards]]`` entry each).
BOARD = "board"

#: The kind of an NVIDIA GPU of a GPU host (:mod:`farm.controllers.gpu`).
GPU = "gpu"

#: The kind of a device that connects out to farm's RPC proxy (:mod:`farm.controllers.proxy`).
PROXY = "proxy"

#: One health reading of one device: a :class:`~farm.health.sample.HealthSample`
#: with ``kind`` set and the readings its kind declares
#: (:mod:`farm.health.kind_readings`); None where not read. ``adb_state`` holds
#: the kind's transport state (``"device"`` = reachable and ready, as adb says
#: it); ``app_running`` whether the kind's RPC server process runs.
HealthReading = HealthSample

#: What thermal gating waits on before a measured run: a reading judged by
#: :func:`farm.health.verdict.cool_enough` (the kind's declared cooling limits;
#: None = not known, never holds back). A kind may read fewer readings here
#: than for a full health sweep.
ThermalReading = HealthSample


@dataclass(frozen=True)
class Discovered:
    """A device the kind can see now.

    Attributes:
        serial: its id in the ``devices`` table; unique across kinds (a board's
            is ``board-<name>``, a phone's its adb serial).
        state: its transport state, in adb's words: ``"device"`` (reachable,
            may be provisioned), ``"offline"``, ``"unauthorized"``, ...
            (:func:`farm.fleet.lifecycle.on_adb_state` reads it).
    """

    serial: str
    state: str


@dataclass(frozen=True)
class RecoveryStep:
    """One rung of a device's recovery ladder.

    Attributes:
        name: a :class:`farm.supervise.ladder.Step` value (``"restart_app"``,
            ``"force_stop_relaunch"``, ``"reinstall"``, ``"reboot"``); the
            ladder's history stores it, so a board's "restart the server" rung
            is called ``"restart_app"``. A rung the kind does not list counts as
            a failed try, so the ladder climbs past it.
        run: applies the rung; returns once the server should be back (the
            caller then checks the tracker), or at once for a reboot. Raises
            PhoneFault (or another FarmError) when the rung failed.
        comes_back_alone: True for a reboot: the device leaves and comes back
            through discovery; the caller does not wait for its registration.
    """

    name: str
    run: Callable[[], None]
    comes_back_alone: bool = False


@dataclass(frozen=True)
class TargetSpec:
    """How to compile for one processor of a device.

    Attributes:
        target: a dict :class:`tvm.target.Target` accepts, with ``host`` set for
            GPU targets, e.g. ``{"kind": "llvm", "mtriple": "aarch64-linux-gnu",
            "num-cores": 4}`` or ``{"kind": "cuda", "arch": "sm_90", "host": {...}}``.
        host: the CPU target the host code is compiled for (``target`` itself
            for CPU targets).
        fcompile: the picklable ``fcompile`` that
            ``Module.export_library(path, fcompile=...)`` links the ``.so`` with
            (a cross compiler, the NDK clang); None for the host's default compiler.
    """

    target: dict[str, Any]
    host: dict[str, Any]
    fcompile: Callable[..., None] | None = None


@dataclass(frozen=True)
class ControllerContext:
    """What a controller factory gets: farm's settings and the shared services.

    Attributes:
        settings: farm's validated settings (tracker, the kind's config section).
        services: kind-specific shared objects by name, e.g. ``{"adb": Adb,
            "loop": LoopThread}`` from farmd; a factory raises ConfigError when
            one it needs is missing.
    """

    settings: Settings | None = None
    services: Mapping[str, Any] = field(default_factory=dict)

    def require_settings(self, kind: str) -> Settings:
        """farm's settings, for a factory that cannot build without them.

        Args:
            kind: the kind whose controller asks ("board"), for the message.

        Raises:
            ConfigError: no settings were given ("the board controller needs
                farm's settings").
        """
        if self.settings is None:
            raise ConfigError("device kind", f"the {kind} controller needs farm's settings")
        return self.settings


@runtime_checkable
class DeviceController(Protocol):
    """What farm asks of one kind of device. One instance serves every device of the kind.

    Thread-safe: the fleet manager calls it from its sweep pool and task threads.
    """

    kind: str

    def discover(self) -> list[Discovered]:
        """The kind's devices visible now with their transport state.

        Raises:
            InfraFault: the kind's discovery itself failed (adb server down).
        """
        ...

    def facts(self, serial: str) -> dict[str, Any]:
        """The device's facts as stored in ``devices.facts`` (JSON).

        Keys :class:`~farm.queue.spec.DeviceSelection` and the runner read:
        ``abi``/``abis`` (Android ABI, or ``uname -m`` for a Linux host),
        ``soc``, ``model``, ``sdk``, ``gpu``, ``has_opencl``, ``has_vulkan``,
        ``num_cores``, ``cpu_features``; a kind may add its own.

        Raises:
            PhoneFault: the device did not answer or its answer is unreadable.
        """
        ...

    def read_health(self, serial: str, at: datetime, *,
                    registered: bool | None = None) -> HealthReading:
        """One health reading of the device taken at ``at``.

        Args:
            serial: the device.
            at: the reading's time (timezone-aware), stored with it.
            registered: whether the tracker lists the device's key (the caller
                asks the tracker once for all devices); None = unknown.

        Raises:
            PhoneFault: the device did not answer.
        """
        ...

    def start_server(self, serial: str) -> None:
        """(Re)start the device's RPC server pointed at the tracker under :meth:`tracker_key`.

        Returns once the server is started; the caller waits for the key at the tracker.

        Raises:
            PhoneFault: the server could not be started.
            UserFault: a person must act (no RPC APK, no TVM runtime on a board).
        """
        ...

    def serve(self, serial: str, key: str) -> None:
        """(Re)start the device's RPC server under ``key``, and under it at every later start.

        What the device's hold asks it to serve (a tuning job's key, or its own
        :meth:`tracker_key` again); farmd's fleet calls it when the desired key
        and the served one differ (:meth:`farm.fleet.manager.FleetManager.reconcile`).
        The recovery rungs restart the server under the key last served.

        Raises:
            PhoneFault: the server could not be started, or this kind cannot
                serve another key (a proxied device serves the key it registered).
            UserFault: as :meth:`start_server`.
        """
        ...

    def stop_server(self, serial: str) -> None:
        """Stop the device's RPC server and drop what farm opened for it (tunnels); never raises."""
        ...

    def recovery_steps(self, serial: str) -> list[RecoveryStep]:
        """The device's recovery rungs, mildest first (see :class:`RecoveryStep`)."""
        ...

    def compile_target(self, facts: Mapping[str, Any], device: str = "cpu") -> TargetSpec:
        """The compile target and linker for one processor of a device.

        Args:
            facts: the device's stored facts (:meth:`facts`, plus ``gpu_limits``).
            device: ``"cpu"``, ``"opencl"``, ``"vulkan"`` or ``"cuda"``.

        Raises:
            SpecError: the device has no such processor or API.
            PhoneFault: the facts are incomplete (never read).
            ToolMissing: the linker/cross compiler is not installed.
        """
        ...

    def gating_reading(self, serial: str, at: datetime) -> ThermalReading:
        """What thermal gating judges before a measured run.

        Raises:
            PhoneFault: the device did not answer.
        """
        ...

    def tracker_key(self, serial: str) -> str:
        """The tracker key the device's RPC server registers under (letters, digits, ``-``)."""
        ...


@runtime_checkable
class AppMemoryReader(Protocol):
    """A controller that can read the memory of the process serving a device's RPC session.

    Optional, apart from :class:`DeviceController`: a kind without the reading
    does not implement it, and a model result then keeps no peak memory.
    """

    def app_peak_memory_kb(self, serial: str) -> int | None:
        """Peak resident memory (KiB) of the process running the device's RPC session.

        Read while the session is open, after the model ran. None when no such
        process runs (the server is between sessions or gone).

        Raises:
            PhoneFault: the device did not answer, or answered no reading.
        """
        ...


#: Builds the controller of a kind from farm's settings and services.
ControllerFactory = Callable[[ControllerContext], DeviceController]

_REGISTRY: dict[str, ControllerFactory] = {}


def register(kind_name: str, factory: ControllerFactory) -> None:
    """Register (or replace) the controller factory of a device kind.

    Args:
        kind_name: the ``devices.kind`` value, letters/digits/``-``, at most 16
            characters (the column's width); not ``"any"``.
        factory: builds the kind's controller from a :class:`ControllerContext`.

    Raises:
        ConfigError: the name is not a valid kind name.
    """
    if (not kind_name or len(kind_name) > 16 or kind_name == ANY_KIND
            or not kind_name.replace("-", "").isalnum()):
        raise ConfigError("device kind", f"invalid device kind name {kind_name!r}")
    _REGISTRY[kind_name] = factory


def unregister(kind_name: str) -> None:
    """Forget a kind (tests that registered a stand-in); unknown names are ignored."""
    _REGISTRY.pop(kind_name, None)


def kinds() -> list[str]:
    """The registered device kind names, in registration order."""
    return list(_REGISTRY)


def controller_for(kind: str, context: ControllerContext | None = None) -> DeviceController:
    """A new controller of ``kind``.

    Raises:
        ConfigError: no such kind is registered (the message lists the known ones).
    """
    if kind not in _REGISTRY:
        raise ConfigError("device kind", f"unknown device kind {kind!r}; this farm knows "
                                         f"{', '.join(_REGISTRY) or 'none'}")
    return _REGISTRY[kind](context or ControllerContext())


def controllers_for(context: ControllerContext,
                    skip: tuple[str, ...] = ()) -> dict[str, DeviceController]:
    """One controller of every registered kind not in ``skip``, by kind name.

    Raises:
        ConfigError: a kind's factory refused the settings.
    """
    return {kind: factory(context) for kind, factory in _REGISTRY.items() if kind not in skip}
