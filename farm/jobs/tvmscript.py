"""Import TVMScript-heavy TVM modules (``tvm.s_tir.tensor_intrin``) in seconds, not minutes.

TVMScript's parser captures the caller's variables by walking the stack
(apache-tvm 0.27 ``tvm/script/parser/core/parser.py``:
``inspect.getouterframes(inspect.currentframe())``; ``ir_module`` calls
``inspect.stack()``) and reads only each ``FrameInfo.frame``. But the standard
library builds every ``FrameInfo`` with ``getframeinfo``, which looks up the
frame's source file and, for a frame without one on disk (every
``<frozen importlib._bootstrap>`` frame of an import), calls
``inspect.getmodule``, which copies and walks ``sys.modules``. Importing
``tvm.s_tir.tensor_intrin`` parses ~500 functions, ~15,000 frames: 18 s of
CPU in a fresh process on this project's 2-core host, minutes in one that has
loaded farm and pytest. :func:`light_frames` hands the parser the same frames
and lines without that look-up: 2.4 to 3.5 s of CPU
(``bench/bench_tensor_intrin.py``).

Why not fix it upstream or avoid the import: MetaSchedule's ``TuneContext``
and LocalBuilder workers need the module, and farm runs the wheel as shipped.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import linecache
import sys
import threading
from collections.abc import Iterator
from types import FrameType, ModuleType

__all__ = ["TENSOR_INTRIN", "import_light", "light_frames"]

#: What MetaSchedule's ``TuneContext`` and farm's builder workers import first.
TENSOR_INTRIN = "tvm.s_tir.tensor_intrin"

_patch_lock = threading.Lock()


def _outer_frames(frame: FrameType | None, context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.getouterframes`` without the module look-ups.

    Each frame with its file, line, function and (for ``context`` above 0)
    its own source line from ``linecache``, as TVM's parser reads them
    (``utils.is_defined_in_class`` checks that one line for ``@`` and
    ``class``); ``code_context`` is None where there is no source (a frozen
    module, ``<string>``).
    """
    infos = []
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno) if context > 0 else ""
        infos.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name,
                                       [line] if line else None, 0 if line else None))
        frame = frame.f_back
    return infos


def _stack(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack`` without the module look-ups (its caller's frame first)."""
    return _outer_frames(sys._getframe(1), context)


@contextlib.contextmanager
def light_frames() -> Iterator[None]:
    """Within the block, ``inspect.stack``/``getouterframes`` skip the module look-ups.

    Process-wide while it lasts (the standard library's functions are
    swapped and put back): use it around an import, not around a thread's
    long work.
    """
    with _patch_lock:
        saved = inspect.stack, inspect.getouterframes
        inspect.stack, inspect.getouterframes = _stack, _outer_frames
        try:
            yield
        finally:
            inspect.stack, inspect.getouterframes = saved


def import_light(name: str = TENSOR_INTRIN) -> ModuleType:
    """Import ``name`` under :func:`light_frames` (at once if it is imported already).

    Raises:
        ImportError: as ``importlib.import_module``.
    """
    module = sys.modules.get(name)
    if module is not None:
        return module
    with light_frames():
        return importlib.import_module(name)
