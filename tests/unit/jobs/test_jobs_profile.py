"""Kernel calls read from a Relax module, and timed one by one on a real (local) library."""

from __future__ import annotations

from typing import Any

import pytest

from farm.jobs.params import TimingParams
from farm.jobs.profile import KernelCall, kernel_calls, profile_kernels


def _two_adds() -> Any:
    """``main(x: float32[4, 8])``: ``y = x + x``, then ``y + x``, each a call_tir of ``add``."""
    from tvm import relax, topi

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_te(topi.add, x, x)
            out = bb.emit_output(bb.emit_te(topi.add, y, x))
        bb.emit_func_output(out)
    return bb.get()


def test_every_call_tir_in_order_with_input_and_output_shapes() -> None:
    """Each call_tir is one KernelCall: its PrimFunc's name, inputs then the output."""
    arg = ((4, 8), "float32")
    assert kernel_calls(_two_adds()) == [KernelCall("add", (arg, arg, arg))] * 2


def test_calls_are_counted_timed_and_a_missing_kernel_is_named() -> None:
    """Two calls of one kernel count twice; a name the library lacks is listed, not timed."""
    import tvm
    from tvm import te

    a = te.placeholder((64,), "float32", name="a")
    b = te.compute((64,), lambda i: a[i] * 2.0, name="b")
    library = tvm.compile(te.create_prim_func([a, b]).with_attr("global_symbol", "double"),
                          target="llvm")
    arg = ((64,), "float32")
    calls = [KernelCall("double", (arg, arg))] * 2 + [KernelCall("gone", (arg, arg))]
    profile = profile_kernels(library.mod, tvm.cpu(), calls, TimingParams(2, 1, 1), model_s=1e-3)
    [kernel] = profile.kernels
    assert (kernel.name, kernel.calls) == ("double", 2)
    assert kernel.share_pct == pytest.approx(100.0)  # its total over the sum, in floats
    assert kernel.total_ms == pytest.approx(2 * kernel.per_call_ms) and kernel.per_call_ms > 0
    assert profile.kernels_ms == pytest.approx(kernel.total_ms)
    assert profile.ratio == pytest.approx(profile.kernels_ms / 1.0)
    assert profile.missing == ["gone"]
