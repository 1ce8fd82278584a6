"""RowNorm: softmax and layer norm as vector partial reductions, numbers as numpy's."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import te, topi
from tvm.s_tir import dlight

from farm.jobs.cpu_schedules import RowNorm, TiledReduction, default_rules

TARGET = tvm.target.Target({"kind": "llvm", "mattr": ["+avx2", "+fma"], "num-cores": 4})


def _softmax(shape: tuple[int, ...]) -> tvm.tirx.PrimFunc:
    x = te.placeholder(shape, name="x")
    return te.create_prim_func([x, topi.nn.fast_softmax(x, axis=-1)])


def _layer_norm(shape: tuple[int, ...]) -> tvm.tirx.PrimFunc:
    x = te.placeholder(shape, name="x")
    gamma = te.placeholder(shape[-1:], name="gamma")
    beta = te.placeholder(shape[-1:], name="beta")
    return te.create_prim_func([x, gamma, beta,
                                topi.nn.layer_norm(x, gamma, beta, axis=[-1], epsilon=1e-5)])


def _run(func: tvm.tirx.PrimFunc, args: list[np.ndarray]) -> np.ndarray:
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=TARGET)
    tensors = [tvm.runtime.tensor(a) for a in args]
    lib["main"](*tensors)
    return tensors[-1].numpy()


def _scheduled(func: tvm.tirx.PrimFunc) -> tvm.tirx.PrimFunc:
    with TARGET:
        sch = RowNorm().apply(func, TARGET, False)
    assert sch is not None
    script = str(sch.mod["main"].script())
    # One vector of partial results per reduction, rows in parallel.
    assert "_rf" in script and "T.vectorized" in script and "T.parallel" in script
    return sch.mod["main"]


@pytest.mark.parametrize("shape", [(2, 3, 64), (5, 32)])
def test_softmax_in_vector_partials_matches_numpy(shape: tuple[int, ...]) -> None:
    """Max and sum as rfactor'ed vectors; the exponential once per element; numpy's softmax."""
    x = np.random.default_rng(0).standard_normal(shape).astype("float32") * 4
    got = _run(_scheduled(_softmax(shape)), [x, np.zeros(shape, "float32")])
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_layer_norm_in_vector_partials_matches_numpy() -> None:
    """Sum and sum of squares as rfactor'ed vectors; numpy's layer norm."""
    shape = (1, 6, 48)
    rng = np.random.default_rng(1)
    x, gamma, beta = (rng.standard_normal(s).astype("float32") for s in (shape, 48, 48))
    got = _run(_scheduled(_layer_norm(shape)), [x, gamma, beta, np.zeros(shape, "float32")])
    mean = x.mean(axis=-1, keepdims=True)
    want = (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * gamma + beta
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_default_rules_give_norms_to_row_norm_and_leave_the_rest() -> None:
    """Softmax and layer norm go to RowNorm; a matmul + bias stays TiledReduction's (it comes
    first); a row that is not whole vectors long is left to dlight's Reduction."""
    a = te.placeholder((16, 32), name="a")
    w = te.placeholder((32, 24), name="w")
    k = te.reduce_axis((0, 32), name="k")
    mm = te.compute((16, 24), lambda i, j: te.sum(a[i, k] * w[k, j], axis=k), name="matmul")
    bias = te.compute((16, 24), lambda i, j: mm[i, j] + 1.0, name="bias")
    matmul = te.create_prim_func([a, w, bias])
    funcs = (_softmax((4, 64)), _layer_norm((4, 64)), matmul, _softmax((4, 20)))
    with TARGET:
        picked = [next(type(r) for r in default_rules() if r.apply(f, TARGET, False) is not None)
                  for f in funcs]
    assert picked == [RowNorm, RowNorm, TiledReduction, dlight.cpu.Reduction]


def test_row_norm_refuses_a_reduction_across_rows() -> None:
    """Softmax over the middle axis reads its rows 16 floats apart: a vector of partials
    would gather, so RowNorm leaves it."""
    x = te.placeholder((2, 64, 16), name="x")
    func = te.create_prim_func([x, topi.nn.softmax(x, axis=1)])
    with TARGET:
        assert RowNorm().apply(func, TARGET, False) is None
