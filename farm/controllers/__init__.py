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

import importlib
from typing import cast

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

def _lazy(module: str, controller: str) -> ControllerFactory:
    """A factory that imports ``module`` when first called and builds its ``controller`` class.

    The class's ``from_context(ControllerContext)`` builds the kind's controller.
    """
    def factory(context: ControllerContext) -> DeviceController:
        built = getattr(importlib.import_module(module), controller).from_context(context)
        return cast(DeviceController, built)

    return factory


register(ANDROID, _lazy("farm.controllers.android", "AndroidController"))
register(BOARD, _lazy("farm.controllers.board", "BoardController"))
register(GPU, _lazy("farm.controllers.gpu", "GpuController"))
register(PROXY, _lazy("farm.controllers.proxy", "ProxyController"))
