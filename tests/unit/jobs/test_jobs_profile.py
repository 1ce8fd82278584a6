"""Kernel calls read from a Relax module: names, order, shapes of inputs and outputs."""

from __future__ import annotations

from typing import Any

from farm.jobs.profile import KernelCall, kernel_calls


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
