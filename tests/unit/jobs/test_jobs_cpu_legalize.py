"""farm's CPU legalizations (transposed conv, channel blocks, pools, sigmoid, GEMV) keep numbers."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from farm.jobs.cpu_schedules.build import compile_cpu, scheduled_module

TARGET = tvm.target.Target({"kind": "llvm"})


def _conv_transpose_ref(x: np.ndarray, w: np.ndarray, stride: int, padding: int) -> np.ndarray:
    """Transposed conv by its definition: each input pixel scatters its kernel-weighted block."""
    n, _, h, wd = x.shape
    _, o, kh, kw = w.shape
    full = np.zeros((n, o, (h - 1) * stride + kh, (wd - 1) * stride + kw), "float32")
    for y in range(h):
        for xx in range(wd):
            block = np.einsum("nc,cokl->nokl", x[:, :, y, xx], w)
            full[:, :, y * stride:y * stride + kh, xx * stride:xx * stride + kw] += block
    return full[:, :, padding:full.shape[2] - padding, padding:full.shape[3] - padding]


def _module(kernel: int, stride: int, padding: int, out: int) -> tvm.IRModule:
    """``sigmoid(conv2d_transpose(x, w))`` as a Relax module."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 4, 5, 6), "float32"))
    w = relax.Var("w", relax.TensorType((4, out, kernel, kernel), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d_transpose(x, w, strides=stride, padding=padding))
            z = bb.emit_output(relax.op.sigmoid(y))
        bb.emit_func_output(z)
    return bb.get()


@pytest.mark.parametrize(("kernel", "stride", "padding", "out", "shuffled"),
                         [(2, 2, 0, 3, True), (3, 2, 1, 3, False), (2, 2, 0, 16, True)])
def test_conv_transpose_and_sigmoid_match_numpy(kernel: int, stride: int, padding: int,
                                                out: int, shuffled: bool) -> None:
    """kernel == stride takes the shuffle form (channels last where they fill a vector: 16)."""
    mod = _module(kernel, stride, padding, out)
    fused = scheduled_module(mod, TARGET)
    names = [str(gv.name_hint) for gv in fused.functions]
    text = "\n".join(str(fused[n].script()) for n in names if n != "main")
    assert ("conv2d_transpose_blocks" in text) is shuffled
    # channels last: the blocks buffer ends with the 2 column offsets and the 16 channels
    assert ("T.int64(2), T.int64(16)), scope=\"local\"" in text) is (out == 16)
    assert "T.exp(" not in text  # sigmoid through TOPI's fast_exp, not libm's expf
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 5, 6)).astype("float32")
    w = rng.standard_normal((4, out, kernel, kernel)).astype("float32")
    vm = relax.VirtualMachine(compile_cpu(mod, TARGET, None), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(w)).numpy()
    want = 1.0 / (1.0 + np.exp(-_conv_transpose_ref(x, w, stride, padding)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("size", "mode", "rounding", "clean"), [
    ((8, 12), "asymmetric", "floor", True),               # x2, as the zoo's FPN
    ((12, 18), "asymmetric", "floor", True),              # x3
    ((8, 12), "asymmetric", "round_prefer_floor", False),  # TVM's own form
    ((7, 12), "asymmetric", "floor", False),              # not a whole factor: TVM's own
])
def test_nearest_resize_matches_numpy(size: tuple[int, int], mode: str, rounding: str,
                                      clean: bool) -> None:
    """Nearest upsampling by whole factors reads ``data[.., y // s, x // s]``; all match numpy."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 4, 6)).astype("float32")
    bb = relax.BlockBuilder()
    xv = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [xv]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.image.resize2d(
                xv, size, method="nearest_neighbor", coordinate_transformation_mode=mode,
                rounding_method=rounding))
        bb.emit_func_output(y)
    mod = bb.get()
    fused = scheduled_module(mod, TARGET)
    text = "\n".join(str(fused[gv].script()) for gv in fused.functions if gv.name_hint != "main")
    assert ("T.min(" not in text) is clean  # TOPI's form clamps each source index
    vm = relax.VirtualMachine(compile_cpu(mod, TARGET, None), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    rows = np.floor(np.arange(size[0]) * 4 / size[0]).astype(int)
    cols = np.floor(np.arange(size[1]) * 6 / size[1]).astype(int)
    if rounding == "round_prefer_floor":
        rows = np.ceil(np.arange(size[0]) * 4 / size[0] - 0.5).astype(int)
        cols = np.ceil(np.arange(size[1]) * 6 / size[1] - 0.5).astype(int)
    np.testing.assert_array_equal(got, x[:, :, rows][:, :, :, cols])


def _conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: tuple[int, int, int, int],
              groups: int) -> np.ndarray:
    """conv2d NCHW/OIHW by its definition (cross-correlation), per group."""
    top, left, bottom, right = pad
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    o, ipg, kh, kw = w.shape
    oh = (xp.shape[2] - kh) // stride + 1
    ow = (xp.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], o, oh, ow), "float32")
    opg = o // groups
    for g in range(groups):
        xs = xp[:, g * ipg:(g + 1) * ipg]
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride]
                out[:, g * opg:(g + 1) * opg] += np.einsum(
                    "nchw,oc->nohw", patch, w[g * opg:(g + 1) * opg, :, ky, kx])
    return out


@pytest.mark.parametrize(("channels", "out", "groups", "stride", "pad", "constant", "blocked"), [
    (3, 16, 1, 2, (1, 1, 1, 1), True, True),     # a stem: 3 input channels, one block
    (16, 8, 1, 1, (1, 0, 2, 1), False, True),    # uneven padding, weight not a constant
    (8, 8, 8, 2, (1, 1, 1, 1), True, True),      # depthwise, stride 2
    (6, 6, 6, 1, (0, 0, 0, 0), True, False),     # 6 channels: no block of 8, TVM's own form
    (5, 20, 1, 2, (1, 0, 1, 2), True, True),     # 20 filters: zero filters fill the last block
    (5, 20, 1, 1, (1, 1, 1, 1), False, None),    # the same, weight computed (either form)
])
def test_conv2d_in_channel_blocks_matches_numpy(channels: int, out: int, groups: int, stride: int,
                                                pad: tuple[int, int, int, int], constant: bool,
                                                blocked: bool | None) -> None:
    """conv2d runs on NCHWc blocks where the channels allow; every form matches numpy."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, channels, 9, 11)).astype("float32")
    w = rng.standard_normal((out, channels // groups, 3, 3)).astype("float32")
    bb = relax.BlockBuilder()
    xv = relax.Var("x", relax.TensorType(x.shape, "float32"))
    wv = relax.Var("w", relax.TensorType(w.shape, "float32"))
    params = [xv] if constant else [xv, wv]
    with bb.function("main", params):
        with bb.dataflow():
            weight = relax.const(w) if constant else wv
            y = bb.emit_output(relax.op.nn.conv2d(xv, weight, strides=stride, padding=pad,
                                                  groups=groups))
        bb.emit_func_output(y)
    mod = bb.get()
    with TARGET:
        text = str(scheduled_module(mod, TARGET).script())
    assert blocked is None or ("nchwc" in text) is blocked
    vm = relax.VirtualMachine(compile_cpu(mod, TARGET, None), tvm.cpu())
    args = [tvm.runtime.tensor(x)] + ([] if constant else [tvm.runtime.tensor(w)])
    got = vm["main"](*args).numpy()
    np.testing.assert_allclose(got, _conv_ref(x, w, stride, pad, groups), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("stride", "pixels"), [(3, True), (1, False)])
def test_conv2d_on_short_rows_tiles_pixels_on_one_axis(stride: int, pixels: bool) -> None:
    """A conv whose 3 x 4 outputs give a longer tile on one axis than a row of 4 puts its pixels
    on one axis (9 x 11 outputs keep their rows); both match numpy."""
    from farm.jobs.cpu_schedules.legalize_conv import PIXELS_CONV

    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 8, 9, 11)).astype("float32")
    w = rng.standard_normal((32, 8, 3, 3)).astype("float32")
    bb = relax.BlockBuilder()
    xv = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [xv]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.relu(relax.op.nn.conv2d(
                xv, relax.const(w), strides=stride, padding=1)))
        bb.emit_func_output(y)
    mod = bb.get()
    with TARGET:
        text = str(scheduled_module(mod, TARGET).script())
    assert (PIXELS_CONV in text) is pixels
    vm = relax.VirtualMachine(compile_cpu(mod, TARGET, None), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    want = np.maximum(_conv_ref(x, w, stride, (1, 1, 1, 1), 1), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("shape", "columns", "constant", "packed"), [
    ((1, 40), 20, True, True),         # a classifier: 20 columns padded to whole vectors
    ((2, 3, 40), 32, True, True),      # leading dimensions, 6 rows
    ((1, 40), 20, False, False),       # weight given at run time: TVM's own form
    ((16, 40), 20, True, True),        # 16 rows: packed as well (a transformer's dense layers)
    ((2, 24, 40), 48, True, True),     # 48 rows by 3 whole vectors: the tile's column blocks
])
def test_matmul_by_constant_weight_in_column_blocks_matches_numpy(
        shape: tuple[int, ...], columns: int, constant: bool, packed: bool) -> None:
    """``x @ W.T + b`` (ONNX Gemm, transB) packs a constant weight; all match numpy."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype("float32")
    w = rng.standard_normal((columns, shape[-1])).astype("float32")
    b = rng.standard_normal(columns).astype("float32")
    bb = relax.BlockBuilder()
    xv = relax.Var("x", relax.TensorType(shape, "float32"))
    wv = relax.Var("w", relax.TensorType(w.shape, "float32"))
    with bb.function("main", [xv] if constant else [xv, wv]):
        with bb.dataflow():
            wt = bb.emit(relax.op.permute_dims(relax.const(w) if constant else wv, [1, 0]))
            y = bb.emit_output(relax.op.add(relax.op.matmul(xv, wt), relax.const(b)))
        bb.emit_func_output(y)
    mod = bb.get()
    with TARGET:
        text = str(scheduled_module(mod, TARGET).script())
    assert ("matmul_blocks" in text) is packed
    vm = relax.VirtualMachine(compile_cpu(mod, TARGET, None), tvm.cpu())
    args = [tvm.runtime.tensor(x)] + ([] if constant else [tvm.runtime.tensor(w)])
    np.testing.assert_allclose(vm["main"](*args).numpy(), x @ w.T + b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("channels", "stride", "pad", "after_conv", "blocked"), [
    (16, 2, (1, 1, 1, 1), True, True),     # ResNet's stem: a conv's blocks straight in
    (8, 1, (0, 1, 2, 0), False, True),     # uneven padding, the model's input
    (6, 2, (1, 1, 1, 1), False, False),    # 6 channels: no block, TVM's own form
])
def test_max_pool_in_channel_blocks_matches_numpy(channels: int, stride: int,
                                                  pad: tuple[int, int, int, int],
                                                  after_conv: bool, blocked: bool) -> None:
    """max_pool2d pools a vector of channels where they make blocks; every form matches numpy.

    After a conv that nothing else reads, the conv hands its result over in blocks.
    """
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, channels, 9, 11)).astype("float32")
    w = rng.standard_normal((channels, channels, 1, 1)).astype("float32")
    bb = relax.BlockBuilder()
    xv = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [xv]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(xv, relax.const(w))) if after_conv else xv
            z = bb.emit_output(relax.op.nn.max_pool2d(y, 3, strides=stride, padding=pad))
        bb.emit_func_output(z)
    mod = bb.get()
    with TARGET:
        built = scheduled_module(mod, TARGET)
    text = "\n".join(str(built[gv].script()) for gv in built.functions if gv.name_hint != "main")
    assert ("max_pool2d_nchwc" in text) is blocked
    names = {gv.name_hint for gv in built.functions}
    assert any(n.endswith("_blocks_in") for n in names) is after_conv
    vm = relax.VirtualMachine(compile_cpu(mod, TARGET, None), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    y = _conv_ref(x, w, 1, (0, 0, 0, 0), 1) if after_conv else x
    top, left, bottom, right = pad
    padded = np.pad(y, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=-np.inf)
    oh, ow = (padded.shape[2] - 3) // stride + 1, (padded.shape[3] - 3) // stride + 1
    want = np.max([padded[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                   for i in range(3) for j in range(3)], axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
