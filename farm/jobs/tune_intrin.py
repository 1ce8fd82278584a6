"""TVM's tensor intrinsics imported in seconds instead of minutes.

``tvm.s_tir.tensor_intrin`` is imported by MetaSchedule's ``TuneContext`` and by
``LocalBuilder``'s default build (apache/tvm ``python/tvm/s_tir/meta_schedule/
tune_context.py`` and ``builder/local_builder.py``). It parses about 250
TVMScript functions, and TVMScript's ``T.prim_func`` calls ``inspect.stack()``
for each one to look at its caller's frames (``python/tvm/tirx/script/parser/
entry.py``). ``inspect.stack`` builds every frame's ``FrameInfo`` through
``inspect.getframeinfo``, which, for the import machinery's frames
(``<frozen importlib._bootstrap>``, no file on disk), falls back to
``inspect.getmodule``: a walk over all of ``sys.modules`` per frame. Measured
with cProfile on the 2-core host (TVM 0.27): 90% of the import is those walks;
the import took 63 s in a fresh process and 122 s after farm's job code was
imported (1,900 modules instead of 1,100).

While the import runs, :func:`import_tensor_intrin` puts in ``inspect.stack``'s
place a function that builds the same ``FrameInfo`` (the frame, its file,
line, function name and its one line of context, read with ``linecache``
as ``getframeinfo`` does) without the module lookups: 8 s and 13 s. TVM reads
the frames and their context lines (``is_defined_in_class``,
``resolve_closure_vars``), which are the same.
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import sys
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["fast_inspect_stack", "import_tensor_intrin"]

_LOCK = threading.RLock()  # one swap at a time; the import may nest one


def _stack(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack(context)`` without ``inspect.getmodule``.

    The caller's frames, innermost first, each with its one line of source
    (``context`` > 0) or none.
    """
    frame: FrameType | None = sys._getframe(1)
    frames = []
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno) if context > 0 else ""
        frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name,
                                        [line] if line else None, 0 if line else None))
        frame = frame.f_back
    return frames


@contextlib.contextmanager
def fast_inspect_stack() -> Iterator[None]:
    """``inspect.stack`` replaced by the lookup-free :func:`_stack` inside the block."""
    with _LOCK:
        original = inspect.stack
        inspect.stack = _stack
        try:
            yield
        finally:
            inspect.stack = original


def import_tensor_intrin() -> None:
    """Import ``tvm.s_tir.tensor_intrin`` (and ``tvm``) with :func:`fast_inspect_stack`."""
    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    with fast_inspect_stack():
        import tvm.s_tir.tensor_intrin  # noqa: F401
