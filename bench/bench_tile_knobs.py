"""Each knob value of farm's conv register tile against the default, one kernel at a time.

farm's default conv schedule (:class:`farm.jobs.cpu_schedules.TiledReduction`)
keeps one vector of output channels by up to 8 pixels of a row in registers;
its trace samples the number of channel vectors (``TilePlan.block_factor``,
default 1) and the pixels (``tile_factor``) so that the tuning can change
them. This times each setting of a zoo model's conv (in channel blocks, with
its bias and ReLU, NCHW in and out, as farm legalizes it) against the
default, alternating in rounds on one pinned core, 1 thread, with
``time_evaluator``, and checks each output against the default's.

    python bench/bench_tile_knobs.py --rounds 9 --core 1
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
from typing import Any

CONVS = {
    # name: (in channels, out channels, side, kernel, stride)
    "resnet18 64->64 3x3 @28": (64, 64, 28, 3, 1),
    "resnet18 128->128 3x3 @14": (128, 128, 14, 3, 1),
    "resnet18 256->256 3x3 @7": (256, 256, 7, 3, 1),
    "resnet18 512->512 3x3 @4": (512, 512, 4, 3, 1),
    "det_head 32->32 3x3 @20": (32, 32, 20, 3, 1),
    "det_head 64->64 3x3 @10": (64, 64, 10, 3, 1),
    "det_head 32->64 3x3 s2 @20": (32, 64, 20, 3, 2),
    "mobilenet_v2 16->96 1x1 @112": (16, 96, 112, 1, 1),
    "mobilenet_v2 32->192 1x1 @28": (32, 192, 28, 1, 1),
    "mobilenet_v2 192->64 1x1 @14": (192, 64, 14, 1, 1),
    "mobilenet_v2 3->32 3x3 s2 @224": (3, 32, 224, 3, 2),
    "mobilenet_v2 96->24 1x1 @56": (96, 24, 56, 1, 1),
    "mobilenet_v2 144->32 1x1 @28": (144, 32, 28, 1, 1),
    "mobilenet_v2 64->384 1x1 @14": (64, 384, 14, 1, 1),
    "mobilenet_v2 384->96 1x1 @14": (384, 96, 14, 1, 1),
    "mobilenet_v2 96->576 1x1 @14": (96, 576, 14, 1, 1),
    "mobilenet_v2 576->160 1x1 @7": (576, 160, 7, 1, 1),
    "mobilenet_v2 960->320 1x1 @7": (960, 320, 7, 1, 1),
    "mobilenet_v2 320->1280 1x1 @7": (320, 1280, 7, 1, 1),
}


def _tensors(c: int, o: int, side: int, k: int, stride: int, lanes: int) -> list[Any]:
    from tvm import te, topi

    from farm.jobs.cpu_schedules.legalize_conv import _block, _blocked_conv, _Conv, _padded_block

    pad = k // 2
    ob, op = _block(o, lanes, min(lanes, 8)), o
    if ob is None or ob < lanes:
        ob, op = _padded_block(o, lanes, ob)
    assert ob is not None, "no channel blocks: the conv is not legalized in blocks"
    conv = _Conv(n=1, c=c, h=side, w=side, o=o, kh=k, kw=k, depthwise=False, ob=ob, op=op,
                 ib=1, strides=(stride, stride), dilation=(1, 1), padding=(pad,) * 4)
    data = te.placeholder((1, c, side, side), name="data")
    shape, axes = conv.weight_order
    weight = te.placeholder([shape[a] for a in axes], name="weight")
    bias = te.placeholder((1, o, 1, 1), name="bias")
    out = topi.nn.relu(topi.add(_blocked_conv(conv)(data, weight), bias))
    return [data, weight, bias, out]


def _variant(func: Any, target: Any, block: int, rows: int | None) -> Any | None:
    """farm's schedule of ``func`` with the tile's knobs set, or None where they do not fit."""
    from farm.jobs.cpu_schedules import rules

    plan_of = rules._plan

    def plan(sch: Any, main: Any, lanes: int, registers: int) -> Any:
        found = plan_of(sch, main, lanes, registers)
        if found is None or (found.block is None and block > 1):
            return None
        loops = sch.get_loops(main)
        changes: dict[str, int] = {}
        if found.block is not None:
            if (rules.extent(sch, loops[found.block]) or 1) % block:
                return None
            changes["block_factor"] = block
        if rows is not None and found.tile is not None:
            if (rules.extent(sch, loops[found.tile]) or 1) % rows:
                return None
            changes["tile_factor"] = rows
        return dataclasses.replace(found, **changes)

    rules._plan = plan
    try:
        with target:
            return rules.TiledReduction().apply(func, target, False)
    finally:
        rules._plan = plan_of


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import tvm
    from _one_core import one_core_target
    from tvm import te

    from farm.jobs.cpu_schedules.common import vector_lanes

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--convs", nargs="*", default=list(CONVS))
    parser.add_argument("--blocks", nargs="*", type=int, default=[1, 2, 4])
    parser.add_argument("--rows", nargs="*", type=int, default=[0],
                        help="tile rows to try besides the default's (0: the default only)")
    args = parser.parse_args(argv)
    target = one_core_target(args.core)
    lanes = vector_lanes(target)
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}, core {args.core}, "
          f"{lanes} lanes")
    print("| conv | blocks x rows | ms (median) | /default (median, range) | max abs diff |")
    print("|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name in args.convs:
        tensors = _tensors(*CONVS[name], lanes=lanes)
        func = te.create_prim_func(tensors)
        arrays = [rng.standard_normal([int(d) for d in t.shape]).astype("float32")
                  for t in tensors]
        timers, outputs = {}, {}
        for block in args.blocks:
            for rows in args.rows:
                sch = _variant(func, target, block, rows or None)
                if sch is None:
                    continue
                lib = tvm.compile(tvm.IRModule({"main": sch.mod["main"]}), target=target)
                tensors_in = [tvm.runtime.tensor(a) for a in arrays]
                lib["main"](*tensors_in)
                outputs[(block, rows)] = tensors_in[-1].numpy()
                timers[(block, rows)] = (lib.mod.time_evaluator("main", tvm.cpu(), number=20,
                                                            repeat=1), tensors_in)
        times: dict[tuple[int, int], list[float]] = {key: [] for key in timers}
        for _ in range(args.rounds):
            for key, (timer, tensors_in) in timers.items():
                times[key].append(timer(*tensors_in).mean * 1e3)
        base = next(iter(times))
        for key, samples in times.items():
            ratios = [s / b for s, b in zip(samples, times[base], strict=True)]
            diff = float(np.abs(outputs[key] - outputs[base]).max())
            print(f"| {name} | {key[0]} x {key[1] or 'default'} | {statistics.median(samples):.4f}"
                  f" | {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) "
                  f"| {diff:.1e} |")
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
