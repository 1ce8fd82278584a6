"""Device controllers: one module per device kind, one registry listing them.

::

    base.py      DeviceController (the protocol), its dataclasses, the registry
    android.py   phones over adb with the TVM RPC app
    board.py     Linux boards over SSH (``[[boards]]``)
    gpu.py       NVIDIA GPUs of a GPU host, through NVML and a CUDA rpc_server
    proxy.py     devices that connect out to farm's rpc_proxy (iOS app, browser)

Adding a kind is one module implementing
:class:`~farm.controllers.base.DeviceController` and one ``register`` line
below. A factory imports its module when first called, so importing this
package stays cheap (no adb, SSH or NVML import) for ``farmctl`` and the scheduler.
"""

from __future__ import annotations

from farm.controllers.base import (
    ANY_KIND,
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

#: The kind of a phone (the ``devices.kind`` column's default).
ANDROID = "android"


def _android(context: ControllerContext) -> DeviceController:
    from farm.controllers.android import AndroidController

    return AndroidController.from_context(context)


register(ANDROID, _android)


#: A Linux board reached over SSH (one ``[[boards]]`` entry each).
BOARD = "board"


def _board(context: ControllerContext) -> DeviceController:
    from farm.controllers.board import BoardController

    return BoardController.from_context(context)


register(BOARD, _board)

#: The kind of an NVIDIA GPU of a GPU host (:mod:`farm.controllers.gpu`).
GPU = "gpu"


def _gpu(context: ControllerContext) -> DeviceController:
    from farm.controllers.gpu import GpuController

    return GpuController.from_context(context)


register(GPU, _gpu)

#: The kind of a device that connects out to farm's RPC proxy (:mod:`farm.controllers.proxy`).
PROXY = "proxy"


def _proxy(context: ControllerContext) -> DeviceController:
    from farm.controllers.proxy import ProxyController

    return ProxyController.from_context(context)


register(PROXY, _proxy)
