"""farm.jobs.tvmscript: TVMScript parses with light frames, and the standard library is put back."""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest

from farm.jobs.tvmscript import light_frames


def _caller_frame_seen() -> object:
    return inspect.stack()[1].frame


def _both() -> tuple[list[inspect.FrameInfo], list[inspect.FrameInfo]]:
    def light() -> list[inspect.FrameInfo]:
        with light_frames():
            return inspect.stack()[1:]  # from the caller's frame, as the next call

    return inspect.stack(), light()  # one line: both see the same caller line


class TestLightFrames:
    def test_gives_the_frames_lines_and_source_line_that_inspect_stack_gives(self) -> None:
        """TVM reads each frame, its code and the one line of code_context: all equal."""
        slow, fast = _both()
        assert len(fast) == len(slow)
        for mine, theirs in zip(fast, slow, strict=True):
            assert mine.frame is theirs.frame
            assert (mine.filename, mine.lineno, mine.function) == (
                theirs.filename, theirs.lineno, theirs.function)
            assert mine.code_context == theirs.code_context
            assert mine.index == theirs.index

    def test_frames_start_at_the_caller(self) -> None:
        with light_frames():
            here = sys._getframe()
            assert _caller_frame_seen() is here
            outer = inspect.getouterframes(here, 0)
            assert outer[0].frame is here and outer[0].code_context is None
            assert outer[0].function == "test_frames_start_at_the_caller"

    def test_the_standard_functions_are_put_back_after_an_error(self) -> None:
        saved = inspect.stack, inspect.getouterframes

        def fail_inside() -> None:
            with light_frames():
                assert inspect.stack is not saved[0]
                raise RuntimeError

        with pytest.raises(RuntimeError):
            fail_inside()
        assert (inspect.stack, inspect.getouterframes) == saved

    def test_a_prim_func_reads_a_closure_variable_through_them(self) -> None:
        """The parser finds ``scale`` in the enclosing frame, as with the standard frames."""
        import tvm
        from tvm.script import tirx as T  # noqa: N812 - TVMScript's own spelling

        def make(scale: float) -> object:
            @T.prim_func
            def scaled(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")) -> None:
                for i in range(4):
                    b[i] = a[i] * T.float32(scale)
            return scaled

        with light_frames():
            func = make(3.0)
        lib = tvm.compile(func, target="llvm")
        a = tvm.runtime.tensor(np.arange(4, dtype="float32"))
        b = tvm.runtime.tensor(np.zeros(4, dtype="float32"))
        lib(a, b)
        np.testing.assert_allclose(b.numpy(), np.arange(4, dtype="float32") * 3.0)
