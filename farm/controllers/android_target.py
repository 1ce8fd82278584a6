"""An Android phone's compile target: the triple of its ABI and the linker that links for it.

:class:`NdkFcompile` links with the NDK's clang for the target (or the host
compiler for a phone that runs host code), resolved when it first links, so
asking for a target never needs the NDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from farm.controllers.base import TargetSpec
from farm.errors import SpecError

__all__ = ["NdkFcompile", "android_target"]


@dataclass(frozen=True)
class NdkFcompile:
    """A picklable ``fcompile`` that links with the target's linker, resolved on each call.

    Raises (when called):
        ToolMissing: the target needs the NDK and none is configured.
    """

    target: dict[str, Any]
    output_format = "so"

    def __call__(self, output: str, objects: Sequence[str],
                 options: Sequence[str] | None = None) -> None:
        """Link ``objects`` into ``output`` (``Module.export_library``'s ``fcompile`` call)."""
        from farm.jobs.ndk import linker_for

        linker_for(self.target)(output, objects, options)


def android_target(facts: Mapping[str, Any], device: str = "cpu") -> TargetSpec:
    """The Android target of the phone's ABI (from its facts) and its linker.

    Raises:
        SpecError: unknown ABI or device, or the phone lacks the GPU API.
        PhoneFault: the facts have no ABI.
    """
    from farm.jobs import params as jp
    from farm.jobs.targets import device_facts, host_of, target_for

    try:
        kind = jp.DeviceKind(device)
    except ValueError as exc:
        raise SpecError("params.device", f"a phone has no {device!r} device") from exc
    serial = str(facts.get("serial") or "phone")
    target = target_for(device_facts(serial, facts), kind)
    return TargetSpec(target, host_of(target), NdkFcompile(target))
