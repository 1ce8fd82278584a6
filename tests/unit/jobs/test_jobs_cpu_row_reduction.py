"""RowReduction: a global average pool as vector partial sums, numbers as numpy's."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te, topi

from farm.jobs.cpu_schedules import RowReduction, TiledReduction, default_rules

TARGET = tvm.target.Target({"kind": "llvm"})


def _global_average_pool(shape: tuple[int, int, int, int]) -> list[te.Tensor]:
    """``mean`` over H, W as TVM legalizes it: a sum, then a divide."""
    x = te.placeholder(shape, name="x")
    total = topi.sum(x, axis=(2, 3), keepdims=True)
    return [x, topi.divide(total, float(shape[2] * shape[3]))]


def _run(func: tvm.tirx.PrimFunc, x: np.ndarray, out_shape: tuple[int, ...]) -> np.ndarray:
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=TARGET)
    out = tvm.runtime.tensor(np.zeros(out_shape, "float32"))
    lib["main"](tvm.runtime.tensor(x), out)
    return out.numpy()


def test_global_average_pool_in_vector_partial_sums() -> None:
    """A 7x7 and a 6x10 plane: rfactor'ed vector sums, parallel channels, numpy's mean."""
    for shape in [(1, 24, 7, 7), (2, 5, 6, 10)]:
        func = te.create_prim_func(_global_average_pool(shape))
        sch = RowReduction().apply(func, TARGET, False)
        assert sch is not None
        script = str(sch.mod["main"].script())
        assert "_rf" in script and "T.vectorized" in script and "T.parallel" in script
        x = np.random.default_rng(0).standard_normal(shape).astype("float32")
        got = _run(sch.mod["main"], x, (*shape[:2], 1, 1))
        np.testing.assert_allclose(got, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)


def test_default_rules_give_the_pool_to_row_reduction_and_convs_to_tiled() -> None:
    """RowReduction goes first but claims only reductions over the input's trailing axes."""
    pool = te.create_prim_func(_global_average_pool((1, 16, 8, 8)))
    data = te.placeholder((1, 4, 8, 8), name="data")
    weight = te.placeholder((8, 4, 3, 3), name="weight")
    conv = te.create_prim_func([data, weight, topi.nn.conv2d_nchw(data, weight, 1, 1, 1)])
    x = te.placeholder((4, 8, 16), name="x")
    across_rows = te.create_prim_func([x, topi.sum(x, axis=1)])  # a strided sum
    picked = [next(type(r) for r in default_rules() if r.apply(f, TARGET, False) is not None)
              for f in (pool, conv, across_rows)]
    assert picked == [RowReduction, TiledReduction, TiledReduction]
