"""Import TVM's tensor intrinsics in seconds rather than minutes.

MetaSchedule imports ``tvm.s_tir.tensor_intrin`` before it tunes anything
(``TuneContext.__init__``, and ``default_build`` in every builder worker). That
package parses ~500 TVMScript functions at import, and TVM's ``prim_func``
decorator calls ``inspect.stack()`` for each (apache/tvm
``python/tvm/tirx/script/parser/entry.py``: it keeps the caller frames to
resolve closure variables). ``inspect.stack()`` looks up each frame's source
file and module, and ``inspect.getmodule`` scans all of ``sys.modules`` for
a frame it cannot place, as the import machinery's ``<frozen importlib...>``
frames: the cost grows with every module loaded. Measured on this project's
2-core host: 19.3 s of CPU (73.6 s wall at load 5) for the import after
``import tvm``, 2.4 s (6.1 s) with :func:`fast_stack` in its place; after
farm's job code or pytest, the slow import took minutes on the loaded CI host.

TVM reads only ``frame`` (its ``f_code`` and ``f_locals``) and the one line
of ``code_context`` of each frame info (``utils.resolve_closure_vars``,
``utils.is_defined_in_class``), which :func:`fast_stack` gives exactly, from
the frame and ``linecache``, without the module scans.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import threading
from types import FrameType

__all__ = ["fast_stack", "import_tensor_intrin"]

_LOCK = threading.Lock()


def fast_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack(context)`` without the per-frame source file and module look-ups.

    Args:
        context: lines of source around each frame's line; at most the frame's
            own line is given (TVM's parser asks for the default, 1).

    Returns:
        The caller's frame and those above it, innermost first, as
        ``inspect.stack()`` returns them; ``code_context`` is None where the
        file has no source (a frozen module, ``<string>``).
    """
    frames = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno) if context > 0 else ""
        frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name,
                                        [line] if line else None, 0 if line else None))
        frame = frame.f_back
    return frames


def import_tensor_intrin() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` (once per process) with :func:`fast_stack`.

    ``inspect.stack`` is swapped only for the import and put back after it,
    even when the import fails; a concurrent caller in another thread meanwhile
    gets :func:`fast_stack`'s equivalent answer.
    """
    with _LOCK:
        if "tvm.s_tir.tensor_intrin" in sys.modules:
            return
        stack = inspect.stack
        inspect.stack = fast_stack
        try:
            import tvm.s_tir.tensor_intrin  # noqa: F401
        finally:
            inspect.stack = stack
