"""The ``fcompile`` TVM's ``export_library`` links a module's objects with.

One small module of its own so that the NDK's linker choice (:mod:`farm.jobs.ndk`) and
a Linux board's (:mod:`farm.jobs.board_targets`) share it without importing each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Linker"]


@dataclass(frozen=True)
class Linker:
    """A picklable ``fcompile`` for ``Module.export_library``, producing a ``.so``.

    ``export_library(path, fcompile=linker)`` calls it as
    ``linker(output, objects, options)``; ``output_format`` tells TVM the suffix.
    Being a frozen dataclass (not a closure) lets MetaSchedule's builder send it to
    its worker processes.

    Attributes:
        cc_path: the compiler to link with; empty for the host's default compiler.
        from_env: the compiler came from ``TVM_NDK_CC``, so TVM's ndk helper runs it.
    """

    cc_path: str = ""
    from_env: bool = False
    output_format = "so"

    def __call__(
        self, output: str, objects: Sequence[str], options: Sequence[str] | None = None
    ) -> None:
        """Link ``objects`` into the shared library ``output``."""
        from tvm.support import cc, ndk

        if self.from_env:
            ndk.create_shared(output, list(objects), list(options) if options else None)
        elif self.cc_path:
            opts = list(options) if options else ["-shared", "-fPIC", "-lm"]
            cc.create_shared(output, list(objects), options=opts, cc=self.cc_path)
        else:
            cc.create_shared(output, list(objects), options=list(options) if options else None)

    @property
    def is_host(self) -> bool:
        """Whether this links with the host's compiler."""
        return not self.cc_path
