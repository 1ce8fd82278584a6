"""A conv read only by a depthwise conv hands it channel blocks, not NCHW; the numbers hold."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import tvm
from test_jobs_cpu_legalize import TARGET, _conv_ref
from tvm import relax

from farm.jobs.cpu_schedules.build import compile_cpu, scheduled_module


def _model(w1: np.ndarray, w2: np.ndarray, stride: int, also_read: bool) -> tvm.IRModule:
    """``dw(relu(conv1x1(x, w1)), w2)`` (3x3, padding 1), ``+ max_pool(relu(..))`` if ``also_read``.

    ``also_read`` gives the 1x1 conv's result a second reader (as a residual
    add would): then it stays NCHW.
    """
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, w1.shape[1], 9, 10), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, relax.const(w1))))
            z = bb.emit(relax.op.nn.conv2d(y, relax.const(w2), strides=stride, padding=1,
                                           groups=w2.shape[0]))
            if also_read:
                pool = relax.op.nn.max_pool2d(y, 3, strides=stride, padding=1)
                z = bb.emit(relax.op.add(z, pool))
            out = bb.emit_output(z)
        bb.emit_func_output(out)
    return bb.get()


def _ref(x: np.ndarray, w1: np.ndarray, w2: np.ndarray, stride: int, also_read: bool) -> Any:
    """:func:`_model` in numpy (the pool's padding never wins the max)."""
    y = np.maximum(_conv_ref(x, w1, 1, (0, 0, 0, 0), 1), 0)
    z = _conv_ref(y, w2, stride, (1, 1, 1, 1), w2.shape[0])
    if also_read:
        padded = np.pad(y, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
        oh, ow = z.shape[2:]
        z = z + np.max([padded[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                        for i in range(3) for j in range(3)], axis=0)
    return z


@pytest.mark.parametrize(("stride", "also_read"), [(1, False), (2, False), (1, True)])
def test_conv_hands_the_depthwise_conv_channel_blocks(stride: int, also_read: bool) -> None:
    """The 1x1 conv's result is 5-D ([N, C/b, H, W, b]) between the two calls, unless read twice."""
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((32, 5, 1, 1)).astype("float32")
    w2 = rng.standard_normal((32, 1, 3, 3)).astype("float32")
    x = rng.standard_normal((1, 5, 9, 10)).astype("float32")
    mod = _model(w1, w2, stride, also_read)
    with TARGET:
        built = scheduled_module(mod, TARGET)
    names = [gv.name_hint for gv in built.functions]
    handed = any(n.endswith("_blocks_out") for n in names)
    assert handed is not also_read
    assert any(n.endswith("_blocks_in") for n in names) is not also_read
    main = built["main"].script()
    assert bool(re.search(r"R\.Tensor\(\((\d+, ){4}\d+\)", main)) is not also_read  # 5-D
    vm = relax.VirtualMachine(compile_cpu(mod, TARGET, None), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(got, _ref(x, w1, w2, stride, also_read), rtol=1e-4, atol=1e-4)
