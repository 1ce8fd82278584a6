"""farm.jobs.tvmscript: TVMScript parses with light frames, and the standard library is put back."""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest

from farm.jobs.tvmscript import light_frames


def _caller_frame_seen() -> object:
    return inspect.stack()[1].frame


class TestLightFrames:
    def test_frames_are_the_callers_without_source_lines(self) -> None:
        with light_frames():
            here = sys._getframe()
            assert _caller_frame_seen() is here
            outer = inspect.getouterframes(here)
            assert outer[0].frame is here and outer[0].code_context is None
            assert outer[0].function == "test_frames_are_the_callers_without_source_lines"

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
