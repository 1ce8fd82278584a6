"""farm's default CPU schedule rules: each schedules its operator and keeps its numbers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tvm
from tvm import te, topi
from tvm.s_tir.dlight.analysis.common_analysis import get_sblockrealize

from farm.jobs.cpu_schedules import (
    Injective,
    ParallelFallback,
    RowNorm,
    RowReduction,
    TiledReduction,
    default_rules,
)
from farm.jobs.cpu_schedules.common import vector_factor
from farm.jobs.cpu_schedules.legalize import _shuffled
from farm.jobs.cpu_schedules.legalize_conv import _blocked_conv, _Conv

TARGET = tvm.target.Target({"kind": "llvm"})


def _conv(bias_relu: bool) -> list[te.Tensor]:
    data = te.placeholder((1, 8, 10, 12), name="data")
    weight = te.placeholder((16, 8, 3, 3), name="weight")
    out = topi.nn.conv2d_nchw(data, weight, stride=1, padding=1, dilation=1)
    if not bias_relu:
        return [data, weight, out]
    bias = te.placeholder((1, 16, 1, 1), name="bias")
    return [data, weight, bias, topi.nn.relu(topi.add(out, bias))]


def _depthwise() -> list[te.Tensor]:
    data = te.placeholder((1, 8, 12, 12), name="data")
    weight = te.placeholder((8, 1, 3, 3), name="weight")
    return [data, weight, topi.nn.depthwise_conv2d_nchw(data, weight, 2, 1, 1)]


def _blocked(depthwise: bool, stride: int = 1) -> list[te.Tensor]:
    """A 3x3 conv in channel blocks as farm's legalization writes it, padding 1, NCHW out."""
    channels, out = (32, 32) if depthwise else (3, 16)
    conv = _Conv(n=1, c=channels, h=9, w=10, o=out, kh=3, kw=3, depthwise=depthwise, ob=16,
                 op=out, ib=16 if depthwise else 1, strides=(stride, stride), dilation=(1, 1),
                 padding=(1, 1, 1, 1))
    data = te.placeholder((1, channels, 9, 10), name="data")
    shape, axes = conv.weight_order
    weight = te.placeholder([shape[a] for a in axes], name="weight")
    return [data, weight, _blocked_conv(conv)(data, weight)]


def _matmul() -> list[te.Tensor]:
    a = te.placeholder((6, 20), name="a")
    b = te.placeholder((20, 24), name="b")
    return [a, b, topi.nn.matmul(a, b)]


def _pool() -> list[te.Tensor]:
    data = te.placeholder((1, 4, 8, 8), name="data")
    return [data, topi.nn.pool2d(data, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "max")]


def _elementwise() -> list[te.Tensor]:
    x = te.placeholder((3, 5, 32), name="x")
    return [x, topi.transpose(topi.sigmoid(topi.add(x, 1.0)), (0, 2, 1))]


def _mean() -> list[te.Tensor]:
    x = te.placeholder((1, 6, 5, 5), name="x")
    return [x, topi.sum(x, axis=(2, 3))]


def _softmax() -> list[te.Tensor]:
    x = te.placeholder((3, 64), name="x")
    return [x, topi.nn.fast_softmax(x, axis=-1)]


def _run(func: Any, arrays: list[np.ndarray]) -> np.ndarray:
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                      target=TARGET)
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    lib["main"](*tensors)
    return tensors[-1].numpy()


def _check(build: Callable[[], list[te.Tensor]], rule: Any) -> str:
    """Schedule ``build``'s function with ``rule``; compare its output to the plain one's."""
    tensors = build()
    func = te.create_prim_func(tensors)
    sch = rule.apply(func, TARGET, False)
    assert sch is not None, f"{type(rule).__name__} did not apply"
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors]
    arrays[-1] = np.zeros_like(arrays[-1])
    want = _run(func, [a.copy() for a in arrays])
    got = _run(sch.mod["main"], arrays)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return str(sch.mod["main"].script())


class TestTiledReduction:
    def test_conv2d_register_tile(self) -> None:
        """A conv is parallel, vectorized over width and unrolled over output channels."""
        script = _check(lambda: _conv(bias_relu=True), TiledReduction())
        assert "T.parallel" in script
        assert "T.vectorized" in script
        assert "T.unroll" in script
        assert 'scope="local"' in script

    def test_depthwise(self) -> None:
        """A strided depthwise conv is parallel and vectorized (no channel reuse to tile)."""
        script = _check(_depthwise, TiledReduction())
        assert "T.parallel" in script
        assert "T.vectorized" in script

    def test_depthwise_pads_each_channel_block_in_its_loop(self) -> None:
        """The padded copy in channel blocks runs inside the conv's one parallel loop."""
        script = _check(lambda: _blocked(depthwise=True), TiledReduction())
        assert script.count("T.parallel") == 1  # a copy of its own would be a second nest
        assert script.index("T.parallel") < script.index('T.sblock("conv2d_pack_data")')

    def test_depthwise_copy_stays_whole_with_fewer_blocks_than_cores(self) -> None:
        """2 channel blocks on a 4-core target: the blocks alone would leave 2 cores idle."""
        func = te.create_prim_func(_blocked(depthwise=True))
        target = tvm.target.Target({"kind": "llvm", "num-cores": 4})
        sch = TiledReduction().apply(func, target, False)
        assert sch is not None
        assert str(sch.mod["main"].script()).count("T.parallel") == 2

    @pytest.mark.parametrize("stride", [2, 1])
    def test_padding_is_a_nest_of_its_own(self, stride: int) -> None:
        """A 3x3 conv's NCHW padding copy runs before the tile's loop, at either stride."""
        script = _check(lambda: _blocked(depthwise=False, stride=stride), TiledReduction())
        assert script.count("T.parallel") == 2

    def test_write_back_vectorized_along_the_row(self) -> None:
        """The NCHW write-back of a channel-block tile stores along the row, not across planes."""
        from tvm import tirx

        tensors = _blocked(depthwise=False)
        _check(lambda: tensors, TiledReduction())
        sch = TiledReduction().apply(te.create_prim_func(tensors), TARGET, False)
        write = sch.get_sblock("conv2d_nchwc_local")
        innermost = sch.get(sch.get_loops(write)[-1])
        assert innermost.kind == tirx.ForKind.VECTORIZED
        block = sch.get(write)
        last_index = block.writes[0].region[-1].min  # the output's contiguous axis
        values = get_sblockrealize(sch, write).iter_values
        row = [value for iv, value in zip(block.iter_vars, values, strict=True)
               if _uses(last_index, iv.var)]
        assert any(_uses(value, innermost.loop_var) for value in row)

    def test_transposed_conv_writes_tile_and_offsets_as_one_row(self) -> None:
        """A 2x2 stride-2 transposed conv, channels last: the tile's x and kx are one vector store.

        The output column is ``x * 2 + kx``: the write-back's innermost loop is
        the tile's 8 pixels by the 2 offsets fused (16 adjacent floats), not
        the 2 offsets alone (a store of 2 lanes, 8 pixels apart).
        """
        from tvm import tirx

        data = te.placeholder((1, 16, 5, 8), name="data")
        weight = te.placeholder((16, 2, 2, 16), name="weight")  # [I, kh, kw, O]
        tensors = [data, weight, _shuffled([2, 2], "float32", channels_last=True)(data, weight)]
        _check(lambda: tensors, TiledReduction())
        sch = TiledReduction().apply(te.create_prim_func(tensors), TARGET, False)
        write = sch.get_sblock("conv2d_transpose_blocks_local")
        innermost = sch.get(sch.get_loops(write)[-1])
        assert innermost.kind == tirx.ForKind.VECTORIZED
        assert int(innermost.extent) == 16
        values = get_sblockrealize(sch, write).iter_values
        assert sum(_uses(value, innermost.loop_var) for value in values) == 2  # x and kx

    def test_padded_channels_write_back_whole_rows(self) -> None:
        """24 channels padded to 32: the predicated write-back stores rows, one per channel."""
        from tvm import tirx

        conv = _Conv(n=1, c=4, h=6, w=8, o=24, kh=1, kw=1, depthwise=False, ob=16, op=32, ib=1,
                     strides=(1, 1), dilation=(1, 1), padding=(0, 0, 0, 0))
        data = te.placeholder((1, 4, 6, 8), name="data")
        shape, axes = conv.weight_order
        weight = te.placeholder([shape[a] for a in axes], name="weight")
        tensors = [data, weight, _blocked_conv(conv)(data, weight)]
        _check(lambda: tensors, TiledReduction())
        sch = TiledReduction().apply(te.create_prim_func(tensors), TARGET, False)
        loops = [sch.get(loop) for loop in sch.get_loops(sch.get_sblock("conv2d_nchwc_local"))]
        assert [loop.kind for loop in loops[-2:]] == [tirx.ForKind.VECTORIZED,
                                                      tirx.ForKind.UNROLLED]
        assert int(loops[-1].extent) == 16  # the channels of a block, a row store each

    def test_matmul(self) -> None:
        """A matmul is vectorized over columns with a register tile of rows."""
        script = _check(_matmul, TiledReduction())
        assert "T.parallel" in script
        assert "T.vectorized" in script
        assert "T.unroll" in script

    def test_max_pool(self) -> None:
        """Max pooling keeps its numbers and runs in parallel."""
        assert "T.parallel" in _check(_pool, TiledReduction())

    def test_reduction_over_the_innermost_axis_stays_scalar(self) -> None:
        """A sum over H, W is parallel over channels, not vectorized across rows."""
        script = _check(_mean, TiledReduction())
        assert "T.parallel" in script
        assert "T.vectorized" not in script

    def test_elementwise_is_not_its_job(self) -> None:
        """Functions without a reduction are left to the next rule."""
        assert TiledReduction().apply(te.create_prim_func(_elementwise()), TARGET, False) is None


def test_the_default_s_tile_sizes_are_open_to_the_search() -> None:
    """The conv's vector, tile and block splits (x, output channels, rows of the image) are
    sampled perfect tiles with the plan's decision:
    MetaSchedule's MutateTileSize turns the default schedule (measured as a task's first
    trial) into other tilings of it, and each replays to the same numbers."""
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule import _ffi_api

    from farm.jobs.tvmscript import TENSOR_INTRIN, import_light

    import_light(TENSOR_INTRIN)  # what TuneContext imports, in seconds rather than a minute
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    tensors = _conv(bias_relu=True)
    func = te.create_prim_func(tensors)
    sch = TiledReduction().apply(func, target, False)
    samples = [i for i in sch.trace.insts if i.kind.name == "SamplePerfectTile"]
    assert len(samples) == 3
    mod = tvm.IRModule({"main": func})
    mutator = ms.mutator.MutateTileSize()
    mutator._initialize_with_tune_context(ms.TuneContext(mod=mod, target=target,
                                                         task_name="conv"))
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors]
    arrays[-1] = np.zeros_like(arrays[-1])
    want = _run(func, [a.copy() for a in arrays])
    tilings = set()
    for seed in range(1, 9):  # a seed whose move cannot be made gives None
        trace = _ffi_api.MutatorApply(mutator, sch.trace, seed)
        if trace is None:
            continue
        mutant = tvm.s_tir.Schedule(mod)
        trace.apply_to_schedule(mutant, remove_postproc=False)
        tilings.add(str([[int(f) for f in trace.decisions[s]] for s in samples]))
        np.testing.assert_allclose(_run(mutant.mod["main"], [a.copy() for a in arrays]), want,
                                   rtol=1e-5, atol=1e-5)
    assert len(tilings) > 1, tilings


def _uses(expr: Any, var: Any) -> bool:
    from tvm.tirx.analysis import undefined_vars

    return any(v.same_as(var) for v in undefined_vars(expr))


def test_injective_inlines_and_vectorizes() -> None:
    """Elementwise chains become one parallel, vectorized nest."""
    script = _check(_elementwise, Injective())
    assert script.count("T.sblock(") == 2  # the root and one nest
    assert "T.parallel" in script
    assert "T.vectorized" in script


@pytest.mark.parametrize(("width", "repeated"), [(20, True), (10, False)])
def test_injective_repeats_each_value_of_a_nearest_upsampling(width: int,
                                                              repeated: bool) -> None:
    """``out[.., x] = data[.., x // 2]``: the repeat unrolled in a plain loop over input pixels.

    LLVM's loop vectorizer turns that loop into vector loads and shuffles;
    TVM's vectorized loop over outputs loads each lane alone. An input row
    shorter than a vector (10 of 16 lanes) keeps TVM's vector loop.
    """
    from tvm import tirx

    def upsample() -> list[te.Tensor]:
        data = te.placeholder((1, 3, 4, width), name="data")
        return [data, te.compute((1, 3, 8, 2 * width),
                                 lambda n, c, y, x: data[n, c, y // 2, x // 2], name="up")]

    _check(upsample, Injective())
    sch = Injective().apply(te.create_prim_func(upsample()), TARGET, False)
    loops = [sch.get(loop) for loop in sch.get_loops(sch.get_sblock("up"))]
    kinds = [loop.kind for loop in loops]
    if repeated:
        assert kinds[-2:] == [tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED]
        assert int(loops[-1].extent) == 2
    else:
        assert kinds[-1] == tirx.ForKind.VECTORIZED


@pytest.mark.parametrize(("width", "vectorized"), [(80, False), (28, True)])
def test_rows_whose_vector_would_be_short_are_left_to_llvm(width: int, vectorized: bool) -> None:
    """A padded row of 82 floats (2 x 41: TVM's vector would be 2 lanes) stays a plain loop.

    LLVM's loop vectorizer takes whole vectors of it and a remainder; a row
    of 30 is one vector of TVM's.
    """
    def pad() -> list[te.Tensor]:
        data = te.placeholder((1, 4, 6, width), name="data")
        return [data, topi.nn.pad(data, (0, 0, 1, 1), (0, 0, 1, 1), name="pad")]

    script = _check(pad, Injective())
    assert ("T.vectorized" in script) is vectorized
    assert "T.parallel" in script


@pytest.mark.parametrize(("build", "rule"), [
    (lambda: _conv(bias_relu=True), TiledReduction()), (lambda: _blocked(depthwise=True),
                                                        TiledReduction()),
    (_elementwise, Injective()), (_mean, ParallelFallback()), (_mean, RowReduction()),
    (_softmax, RowNorm()),
])
@pytest.mark.parametrize("cores", [1, 2])
def test_a_one_core_target_gets_no_parallel_loop(build: Callable[[], list[te.Tensor]],
                                                 rule: Any, cores: int) -> None:
    """``num-cores`` 1: every loop serial (a parallel one is a thread pool launch for nothing)."""
    target = tvm.target.Target({"kind": "llvm", "num-cores": cores})
    tensors = build()
    func = te.create_prim_func(tensors)
    sch = rule.apply(func, target, False)
    assert sch is not None
    assert ("T.parallel" in str(sch.mod["main"].script())) is (cores > 1)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors]
    arrays[-1] = np.zeros_like(arrays[-1])
    np.testing.assert_allclose(_run(sch.mod["main"], [a.copy() for a in arrays]),
                               _run(func, arrays), rtol=1e-5, atol=1e-5)


def test_fallback_parallelizes_any_reduction() -> None:
    """The fallback runs a reduction's outer spatial loops in parallel."""
    assert "T.parallel" in _check(_mean, ParallelFallback())


def test_softmax_of_rows_not_whole_vectors_goes_to_dlight_reduction() -> None:
    """Softmax over rows of 30 (no whole vector of lanes): farm's RowNorm refuses it and
    dlight.cpu.Reduction, after farm's rules, schedules it (test_jobs_cpu_row_norm.py)."""
    x = te.placeholder((4, 30), name="x")
    func = te.create_prim_func([x, topi.nn.softmax(x)])
    used = next(r for r in default_rules() if r.apply(func, TARGET, False) is not None)
    assert type(used).__name__ == "Reduction"


def test_vector_factor() -> None:
    """Two or one registers where they divide the loop, else the whole loop or a divisor."""
    assert vector_factor(112, 16) == 16
    assert vector_factor(64, 16) == 32
    assert vector_factor(28, 16) == 28
    assert vector_factor(7, 16) == 7
    assert vector_factor(1000, 16) == 25
    assert vector_factor(28, 16, tiled=True) == 14
