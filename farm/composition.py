"""The composition root: the one place that fills farm's registries.

Three tables are plain data in their own packages; importing a module registers
nothing. :func:`install` hands each to the registry that reads it:

::

    farm.kinds.KINDS (on first use)       -> farm.queue.catalog      (specs, needs, time limits)
    CONTROLLERS (below)                   -> farm.controllers.base   (controller_for, kinds)
    farm.health.kind_readings.BUILT_IN    -> farm.health.readings    (declared, shown, verdict)

Each entry point calls it once, first: farmd (:class:`farm.daemon.Farmd`), farmctl
(:func:`farm.cli.main.main`), the attempt child (:func:`farm.runner.child.main`),
:mod:`farm.client`, the virtual-phone harness (:func:`farm.testing.fleet_harness`)
and the tests (``tests/conftest.py``). A script that opens a
:class:`~farm.queue.store.Store` and enqueues calls it too; one that does not
gets a :class:`RuntimeError` naming this function, never a spec wrongly refused.

The root sits on its own floor, above the kinds, the controllers and the health
readings it installs and below every entry point that calls it
(docs/architecture.md, "Composition root").
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from farm.controllers.base import (
    ANDROID,
    BOARD,
    GPU,
    PROXY,
    ControllerContext,
    ControllerFactory,
    DeviceController,
    register,
)
from farm.health import readings
from farm.health.kind_readings import BUILT_IN
from farm.queue import catalog

__all__ = ["CONTROLLERS", "install"]


# Each factory imports its controller's module when first called, so installing
# the table stays cheap (no adb, SSH or NVML import) for farmctl and the scheduler.
def _android(context: ControllerContext) -> DeviceController:
    """Phones over adb with the TVM RPC app (:mod:`farm.controllers.android`)."""
    from farm.controllers.android import AndroidController

    return AndroidController.from_context(context)


def _board(context: ControllerContext) -> DeviceController:
    """Linux boards over SSH, ``[[boards]]`` (:mod:`farm.controllers.board`)."""
    from farm.controllers.board import BoardController

    return BoardController.from_context(context)


def _gpu(context: ControllerContext) -> DeviceController:
    """NVIDIA GPUs of a GPU host through NVML (:mod:`farm.controllers.gpu`)."""
    from farm.controllers.gpu import GpuController

    return GpuController.from_context(context)


def _proxy(context: ControllerContext) -> DeviceController:
    """Devices that connect out to farm's rpc_proxy (:mod:`farm.controllers.proxy`)."""
    from farm.controllers.proxy import ProxyController

    return ProxyController.from_context(context)


#: The built-in device kinds' controller factories, in the order farmd builds them.
CONTROLLERS: Mapping[str, ControllerFactory] = MappingProxyType({
    ANDROID: _android,
    BOARD: _board,
    GPU: _gpu,
    PROXY: _proxy,
})

def _kinds() -> Mapping[str, catalog.KindEntry]:
    """The job kinds' table (:data:`farm.kinds.KINDS`), which the catalog loads on first use.

    Importing the kinds costs about 0.4 s (pydantic models, the kinds' modules):
    farmctl's listings, which farmd answers, never pay it.
    """
    from farm.kinds import KINDS

    return KINDS


_installed = False


def install() -> None:
    """Fill the job kinds' catalog, the controllers' registry and the declared readings.

    Idempotent: a second call changes nothing, so a kind or reading a test or a
    benchmark registered on top of the built-ins stays.
    """
    global _installed  # noqa: PLW0603 - the one flag: each process installs once
    if _installed:
        return
    catalog.install(_kinds)
    for name, factory in CONTROLLERS.items():
        register(name, factory)
    readings.install(BUILT_IN)
    _installed = True
