"""Device controllers: one module per device kind, one registry listing them.

::

    base.py      DeviceController (the protocol), its dataclasses, the registry
    android.py   phones over adb with the TVM RPC app
    board.py     Linux boards over SSH (``[[boards]]``)
    gpu.py       NVIDIA GPUs of a GPU host, through NVML and a CUDA rpc_server
    proxy.py     devices that connect out to farm's rpc_proxy (iOS app, browser)

Adding a kind is one module implementing
:class:`~farm.controllers.base.DeviceController` and one entry in
:data:`farm.composition.CONTROLLERS`, which installs the factories: importing
this package registers nothing, and stays cheap (no adb, SSH or NVML import).
"""

from __future__ import annotations

from farm.controllers.base import (
    ANDROID,
    ANY_KIND,
    BOARD,
    GPU,
    PROXY,
    ControllerContext,
    ControllerFactory,
    DeviceController,
    Discovered,
    HealthReading,
    RecoveryStep,
    TargetSpec,
    ThermalReading,
    controller_for,
    controllers_for,
    kinds,
    register,
    unregister,
)

__all__ = [
    "ANDROID",
    "ANY_KIND",
    "BOARD",
    "GPU",
    "PROXY",
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
