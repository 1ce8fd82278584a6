"""A conv read only by another conv hands it channel blocks, not NCHW; the numbers hold."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import tvm
from test_jobs_cpu_legalize import TARGET, _conv_ref
from tvm import relax

from farm.jobs.cpu_schedules.build import compile_cpu, scheduled_module


def _model(w: list[np.ndarray], stride: int, also_read: bool) -> tvm.IRModule:
    """``conv1x1(dw(relu(conv1x1(x, w0)), w1), w2)`` (dw 3x3, padding 1).

    ``also_read`` adds ``max_pool(relu(conv1x1(x, w0)))`` to the depthwise
    conv's result: the first conv's result has a second reader (as a
    residual add would) and stays NCHW.
    """
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, w[0].shape[1], 9, 10), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, relax.const(w[0]))))
            z = bb.emit(relax.op.nn.conv2d(y, relax.const(w[1]), strides=stride, padding=1,
                                           groups=w[1].shape[0]))
            if also_read:
                pool = relax.op.nn.max_pool2d(y, 3, strides=stride, padding=1)
                z = bb.emit(relax.op.add(z, pool))
            out = bb.emit_output(relax.op.nn.conv2d(z, relax.const(w[2])))
        bb.emit_func_output(out)
    return bb.get()


def _ref(x: np.ndarray, w: list[np.ndarray], stride: int, also_read: bool) -> Any:
    """:func:`_model` in numpy (the pool's padding never wins the max)."""
    y = np.maximum(_conv_ref(x, w[0], 1, (0, 0, 0, 0), 1), 0)
    z = _conv_ref(y, w[1], stride, (1, 1, 1, 1), w[1].shape[0])
    if also_read:
        padded = np.pad(y, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
        oh, ow = z.shape[2:]
        z = z + np.max([padded[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                        for i in range(3) for j in range(3)], axis=0)
    return _conv_ref(z, w[2], 1, (0, 0, 0, 0), 1)


@pytest.mark.parametrize(("channels", "stride", "also_read", "handed"), [
    (32, 1, False, {"_out", "_in_out", "_in"}),  # conv -> dw -> conv: the dw reads and writes
    (32, 2, False, {"_out", "_in_out", "_in"}),
    # The first result read twice, the dw's epilogue adding an NCHW tensor of its shape (as
    # a residual add): nothing handed over.
    (32, 1, True, set()),
    # 24 channels: blocks of 8, not filters padded to 16 lanes, where only the dw conv reads
    # the result (legalize.depthwise_fed), so the pair is handed over in blocks of 8.
    (24, 1, False, {"_out", "_in_out", "_in"}),
])
def test_a_conv_hands_the_next_conv_channel_blocks(channels: int, stride: int, also_read: bool,
                                                   handed: set[str] | None) -> None:
    """A conv's result that only a conv reads is 5-D ([N, C/b, H, W, b]) between the calls."""
    rng = np.random.default_rng(3)
    w = [rng.standard_normal(shape).astype("float32")
         for shape in ((channels, 5, 1, 1), (channels, 1, 3, 3), (8, channels, 1, 1))]
    x = rng.standard_normal((1, 5, 9, 10)).astype("float32")
    mod = _model(w, stride, also_read)
    with TARGET:
        built = scheduled_module(mod, TARGET)
    names = [gv.name_hint for gv in built.functions]
    if handed is not None:
        assert {n.split("_blocks")[1] for n in names if "_blocks" in n} == handed
        blocked = re.findall(r"R\.Tensor\(\((\d+, ){4}\d+\)", built["main"].script())
        assert len(blocked) == max(len(handed) - 1, 0)  # the 5-D tensors between the calls
        # The depthwise conv pads the blocks it is handed as it reads them, with no copy; an
        # NCHW input is still copied into blocks.
        dw = next(n for n in names if "conv2d1" in n)
        assert ("conv2d_pack_data" in built[dw].script()) == (not handed)
    vm = relax.VirtualMachine(compile_cpu(mod, TARGET, None), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(got, _ref(x, w, stride, also_read), rtol=1e-4, atol=1e-4)
