"""Compile targets and linkers for Linux boards, from the board's ``uname -m``.

A board runs glibc Linux, so its LLVM triple is ``<arch>-linux-gnu`` (Debian's
multiarch tuples, which are also the prefixes of its cross compilers:
``g++-aarch64-linux-gnu`` installs ``aarch64-linux-gnu-g++``). A board of the
host's own machine gets the *host* target (no ``mtriple``: LLVM's default) and
the host compiler unless a ``cc`` is configured, as TVM's own RPC tutorials do
for a local server. Any other board needs its cross compiler (``cc`` in
``[[boards]]``), resolved before anything is compiled so a missing one fails
the job at once with :class:`~farm.errors.ToolMissing`.

NEON is on by default for ARM: it is mandatory on AArch64 and present on every
ARMv7-A application core boards ship with hard-float userlands (armhf needs
VFPv3-D16 at least; the Cortex-A7/A9/A15/A17 of such boards all have NEON).
"""

from __future__ import annotations

import platform
import shutil
from typing import Any

from farm.errors import SpecError, ToolMissing
from farm.jobs.linker import Linker

__all__ = ["MACHINE_TRIPLES", "board_linker", "board_target", "triple_for"]

#: ``uname -m`` -> (LLVM triple, default -mattr).
MACHINE_TRIPLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "aarch64": ("aarch64-linux-gnu", ("+neon",)),
    "arm64": ("aarch64-linux-gnu", ("+neon",)),
    "armv7l": ("armv7l-linux-gnueabihf", ("+neon",)),
    "armv8l": ("armv7l-linux-gnueabihf", ("+neon",)),  # 32-bit userland on a 64-bit core
    "x86_64": ("x86_64-linux-gnu", ()),
    "i686": ("i686-linux-gnu", ()),
    "riscv64": ("riscv64-linux-gnu", ()),
}

#: Debian's cross-compiler tuple where it differs from the LLVM triple.
_GNU_TUPLES = {"armv7l-linux-gnueabihf": "arm-linux-gnueabihf"}


def triple_for(machine: str) -> tuple[str, tuple[str, ...]]:
    """The LLVM triple and default ``mattr`` of a ``uname -m``.

    Raises:
        SpecError: the machine is not one farm knows (the message lists them).
    """
    if machine not in MACHINE_TRIPLES:
        raise SpecError("device.abi", f"unknown board machine {machine!r}; known: "
                                      f"{', '.join(MACHINE_TRIPLES)}")
    return MACHINE_TRIPLES[machine]


def board_target(machine: str, num_cores: int = 0, *,
                 host_machine: str | None = None) -> dict[str, Any]:
    """The LLVM target for a board's CPU, in TVM 0.27's dict form.

    Args:
        machine: the board's ``uname -m``, e.g. ``"aarch64"``.
        num_cores: its ``nproc`` (0: unknown, left out); MetaSchedule's CPU rules
            read ``num-cores`` to size parallel loops.
        host_machine: this host's ``uname -m``; None = ``platform.machine()``.

    Returns:
        E.g. ``{"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"],
        "num-cores": 6}``; no ``mtriple`` for a board of the host's machine.

    Raises:
        SpecError: unknown machine.
    """
    triple, mattr = triple_for(machine)
    host_machine = platform.machine() if host_machine is None else host_machine
    target: dict[str, Any] = {"kind": "llvm"}
    native = host_machine in MACHINE_TRIPLES and MACHINE_TRIPLES[host_machine][0] == triple
    if not native:
        target["mtriple"] = triple
        if mattr:
            target["mattr"] = list(mattr)
    if num_cores > 0:
        target["num-cores"] = num_cores
    return target


def board_linker(target: dict[str, Any], cc: str | None, *,
                 which: Any = shutil.which) -> Linker:
    """How to link a board's ``.so``: its cross compiler, else the host's.

    A cross target without a configured ``cc`` uses Debian's cross compiler of
    its triple, ``<tuple>-g++`` (``g++-aarch64-linux-gnu`` installs
    ``aarch64-linux-gnu-g++``), which is also what an attempt child links with
    (:func:`farm.jobs.ndk.linker_for` sees only the target).

    Args:
        target: from :func:`board_target`.
        cc: the board's configured ``cc`` (a name on ``$PATH`` or a path), or None.
        which: ``shutil.which`` (tests pass a stand-in).

    Raises:
        ToolMissing: ``cc`` (or, for a cross target without one, Debian's cross
            compiler; for a host target, any C++ compiler) is not installed.
    """
    triple = target.get("mtriple")
    if triple and not cc:
        gnu = _GNU_TUPLES.get(str(triple), str(triple))
        if which(f"{gnu}-g++") is None:
            raise ToolMissing(f"{gnu}-g++", f"the board is {triple}: install g++-{gnu}, or set "
                                            "cc in its [[boards]] entry to its cross compiler")
        cc = f"{gnu}-g++"
    if cc:
        path = which(cc)
        if path is None:
            raise ToolMissing(cc, f"install it (Debian: apt-get install g++-"
                                  f"{_GNU_TUPLES.get(str(triple), str(triple or 'host'))}) "
                                  "or fix cc in [[boards]]")
        return Linker(cc_path=str(path))
    if not any(which(name) for name in ("g++", "c++", "clang++", "gcc", "cc")):
        raise ToolMissing("c++", "install a C++ compiler (apt-get install g++)")
    return Linker()
