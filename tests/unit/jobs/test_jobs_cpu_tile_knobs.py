"""The knobs of farm's conv register tile: the default decision and every sample it allows."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import tvm
from tvm import te, topi

from farm.jobs.cpu_schedules import TiledReduction, rules
from farm.jobs.cpu_schedules.legalize_conv import _blocked_conv, _Conv

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 1})


def _conv() -> list[te.Tensor]:
    """A 3x3 conv in channel blocks (4 blocks of 8 output channels) with bias and ReLU."""
    conv = _Conv(n=1, c=8, h=6, w=8, o=32, kh=3, kw=3, depthwise=False, ob=8, op=32, ib=1,
                 strides=(1, 1), dilation=(1, 1), padding=(1, 1, 1, 1))
    data = te.placeholder((1, 8, 6, 8), name="data")
    shape, axes = conv.weight_order
    weight = te.placeholder([shape[a] for a in axes], name="weight")
    bias = te.placeholder((1, 32, 1, 1), name="bias")
    return [data, weight, bias, topi.nn.relu(topi.add(_blocked_conv(conv)(data, weight), bias))]


def _arrays(tensors: list[te.Tensor]) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors]
    arrays[-1] = np.zeros_like(arrays[-1])
    return arrays


def _library(func: Any) -> Any:
    return tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                       target=TARGET)


def _run(func: Any, arrays: list[np.ndarray]) -> np.ndarray:
    """``func``'s output (its last argument) on ``arrays``."""
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    _library(func)["main"](*tensors)
    return tensors[-1].numpy()


def _assembly(func: Any) -> str:
    """The machine code the build makes of ``func``, as text, without debug info's names.

    (A serial loop's variable, e.g. ``b_oo_0_y_x_0_oi_0_fused``, is named in the
    debug strings; a parallel loop's body is a function of its own.)
    """
    text = str(_library(func).mod.inspect_source("asm"))
    return "\n".join(line for line in text.splitlines() if ".asciz" not in line)


def _block_sample(sch: Any) -> Any:
    """The trace's sample of the channel blocks (the first split of the plan's loops)."""
    return next(i for i in sch.trace.insts if i.kind.name == "SamplePerfectTile")


def test_one_channel_block_is_the_schedule_without_the_knob(monkeypatch: pytest.MonkeyPatch,
                                                             ) -> None:
    """A block decision of 1 compiles to exactly the machine code of the tile of one channel
    vector the rule had before the knob (its extra loop of one iteration is lowered away)."""
    func = te.create_prim_func(_conv())
    plan_of = rules._plan

    def plan(block: int | None) -> Any:
        def fixed(sch: Any, main: Any, lanes: int, registers: int) -> Any:
            found = plan_of(sch, main, lanes, registers)
            assert found is not None and found.block is not None
            return dataclasses.replace(found, block=block, block_factor=1)
        return fixed

    monkeypatch.setattr(rules, "_plan", plan(None))
    without = TiledReduction().apply(func, TARGET, False)
    monkeypatch.setattr(rules, "_plan", plan(1))
    with_knob = TiledReduction().apply(func, TARGET, False)
    assert len(with_knob.trace.insts) > len(without.trace.insts)
    assert _assembly(with_knob.mod["main"]) == _assembly(without.mod["main"])


@pytest.mark.parametrize("blocks", [1, 2, 4])
def test_each_channel_block_count_replays_to_the_same_numbers(blocks: int) -> None:
    """The default's trace with its block decision set to 1, 2 or 4 channel vectors (as the
    search samples it) replays, unrolls that many vectors in the tile, and keeps the numbers."""
    tensors = _conv()
    func = te.create_prim_func(tensors)
    default = TiledReduction().apply(func, TARGET, False)
    sample = _block_sample(default)
    assert [int(f) for f in default.trace.decisions[sample]][1] <= rules.MAX_TILE_BLOCKS
    trace = default.trace.with_decision(sample, [4 // blocks, blocks], remove_postproc=False)
    sch = tvm.s_tir.Schedule(func)
    trace.apply_to_schedule(sch, remove_postproc=False)
    update = sch.get_sblock("conv2d_nchwc_update")
    unrolled = [int(sch.get(loop).extent) for loop in sch.get_loops(update)
                if sch.get(loop).kind == tvm.tirx.ForKind.UNROLLED]
    assert unrolled[0] == blocks
    arrays = _arrays(tensors)
    want = _run(func, [a.copy() for a in arrays])
    np.testing.assert_allclose(_run(sch.mod["main"], arrays), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("triple", "blocks"), [("aarch64-linux-android", 2),
                                                ("armv7a-linux-androideabi", 1)])
def test_the_default_channel_blocks_fill_half_the_registers(triple: str, blocks: int) -> None:
    """A conv of 64 output channels in blocks of 16 on a row of 28, NEON (4 lanes): a tile of
    4 pixels of 2 registers each, 2 channel blocks on AArch64 (16 of its 32 registers), 1 on
    32-bit Arm (8 of 16)."""
    conv = _Conv(n=1, c=8, h=28, w=28, o=64, kh=1, kw=1, depthwise=False, ob=16, op=64, ib=1,
                 strides=(1, 1), dilation=(1, 1), padding=(0, 0, 0, 0))
    data = te.placeholder((1, 8, 28, 28), name="data")
    shape, axes = conv.weight_order
    weight = te.placeholder([shape[a] for a in axes], name="weight")
    target = tvm.target.Target({"kind": "llvm", "mtriple": triple, "mattr": ["+neon"],
                                "num-cores": 1})
    default = TiledReduction().apply(
        te.create_prim_func([data, weight, _blocked_conv(conv)(data, weight)]), target, False)
    assert [int(f) for f in default.trace.decisions[_block_sample(default)]] == [4 // blocks,
                                                                                  blocks]


@pytest.mark.parametrize(("ob", "o", "blocks"), [(16, 64, 2), (8, 72, 3)])
def test_half_vectors_take_half_the_room(ob: int, o: int, blocks: int) -> None:
    """With AVX-512 (16 lanes), a 1x1 conv on a row of 56 (a tile of 8 pixels): blocks of 16
    take 2 channel blocks (16 accumulators); blocks of 8 (72 channels, as a conv that only a
    depthwise conv reads keeps them), each a half register, take 3 of their 9 (24)."""
    conv = _Conv(n=1, c=16, h=56, w=56, o=o, kh=1, kw=1, depthwise=False, ob=ob, op=o, ib=1,
                 strides=(1, 1), dilation=(1, 1), padding=(0, 0, 0, 0))
    data = te.placeholder((1, 16, 56, 56), name="data")
    shape, axes = conv.weight_order
    weight = te.placeholder([shape[a] for a in axes], name="weight")
    target = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 1})
    default = TiledReduction().apply(
        te.create_prim_func([data, weight, _blocked_conv(conv)(data, weight)]), target, False)
    assert [int(f) for f in default.trace.decisions[_block_sample(default)]] == [o // ob // blocks,
                                                                                  blocks]


def _decisions(sch: Any) -> list[list[int]]:
    """The trace's sampled splits in order (channel blocks where there are some, rows, lanes)."""
    return [[int(f) for f in sch.trace.decisions[i]] for i in sch.trace.insts
            if i.kind.name == "SamplePerfectTile"]


def _avx512_default(conv: _Conv) -> Any:
    """farm's default schedule of ``conv`` (in channel blocks, NCHW in and out) with AVX-512."""
    data = te.placeholder((conv.n, conv.c, conv.h, conv.w), name="data")
    shape, axes = conv.weight_order
    weight = te.placeholder([shape[a] for a in axes], name="weight")
    target = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 1})
    return TiledReduction().apply(
        te.create_prim_func([data, weight, _blocked_conv(conv)(data, weight)]), target, False)


@pytest.mark.parametrize(("side", "pixels", "decisions"), [
    (4, True, [[1, 2], [2, 8], [1, 16]]),   # 16 pixels on one axis: 8 of them by 2 blocks
    (4, False, [[1, 2], [1, 4], [1, 16]]),  # a row of 4: 4 pixels, the room for 4 blocks
    (7, False, [[1, 2], [1, 7], [1, 16]]),  # a row of 7 is a whole tile either way
])
def test_a_conv_on_rows_shorter_than_a_tile_tiles_its_pixels(side: int, pixels: bool,
                                                            decisions: list[list[int]]) -> None:
    """A 3x3 conv to 64 channels on 4 x 4 outputs puts the 16 pixels on one axis (as
    ResNet-18's 512-channel convs): a tile of 8 pixels of two rows by 2 channel vectors, where
    the row form takes 4 pixels by 4 vectors (the block decision is capped at 2 by the 4 output
    blocks' split here); 7 x 7 outputs keep their rows."""
    from farm.jobs.cpu_schedules.legalize_conv import PIXELS_CONV, _pixel_axis

    assert _pixel_axis(side, side) is (side == 4)
    conv = _Conv(n=1, c=8, h=side, w=side, o=32, kh=3, kw=3, depthwise=False, ob=16, op=32, ib=1,
                 strides=(1, 1), dilation=(1, 1), padding=(1, 1, 1, 1), pixels=pixels)
    default = _avx512_default(conv)
    assert (PIXELS_CONV in str(default.mod["main"].script())) is pixels
    assert _decisions(default) == decisions



@pytest.mark.parametrize(("depthwise", "rows"), [(False, 16), (True, 8)])
def test_one_channel_vector_that_broadcasts_takes_twice_the_rows(depthwise: bool,
                                                                 rows: int) -> None:
    """With AVX-512, a 1x1 conv to 16 channels (one block, nothing else for the registers) on a
    row of 80 tiles 16 pixels, each weight vector serving all; a depthwise conv, which loads a
    vector of input per pixel, keeps 8."""
    conv = _Conv(n=1, c=16, h=2, w=80, o=16, kh=1, kw=1, depthwise=depthwise, ob=16, op=16,
                 ib=16 if depthwise else 1, strides=(1, 1), dilation=(1, 1),
                 padding=(0, 0, 0, 0))
    assert _decisions(_avx512_default(conv))[0] == [80 // rows, rows]


def test_a_tile_of_two_registers_a_row_keeps_its_rows() -> None:
    """A matmul whose rows are vectors of two registers (128 columns, 32 lanes with AVX-512),
    as the encoder's attention, keeps a tile of 4 rows: 8 of 2 registers were no faster."""
    a = te.placeholder((16, 8), name="a")
    b = te.placeholder((8, 128), name="b")
    target = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 1})
    default = TiledReduction().apply(
        te.create_prim_func([a, b, topi.nn.matmul(a, b)]), target, False)
    assert _decisions(default)[:2] == [[4, 4], [4, 32]]
