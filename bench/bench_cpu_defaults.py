"""farm's default CPU build with and without packed dense weights, against onnxruntime.

For each zoo model (:mod:`farm.zoo`), in one process pinned to one core, TVM
at 1 thread and onnxruntime at 1 intra-op thread: three untuned builds
(:func:`farm.jobs.cpu_schedules.build.compile_cpu`, the ``model`` job's
build), the rule switched off through its constant in one of them:

- ``unpacked``: without the rule (``PACKED_MAX_ROWS = 0``);
- ``gemv``: matmuls of at most 8 rows by a constant weight packed in column
  blocks (the rule until 2026-11-27);
- ``packed``: today's default, every matmul by a constant weight packed
  (:data:`farm.jobs.cpu_schedules.legalize_dense.PACKED_MAX_ROWS`).

Each build's output is checked against onnxruntime (max abs error). Then
``--rounds`` interleaved rounds (:func:`farm.sampling.interleaved_rounds`)
each time onnxruntime and each build (mean of 5 runs; onnxruntime through
``bench/_ort.py``), so a change in the host's load hits all of them alike;
the table gives per build its median time and the median and range of its
per-round ratio to onnxruntime. Not the virtual phone's RPC path
(:mod:`bench.bench_zoo`): the same build, timed in this process.

Reproduce::

    python bench/bench_cpu_defaults.py --rounds 15 --models mobilenet_v2 mobilenet_v3_small
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _one_core import one_core_target
from _ort import ort_sample_s, ort_session

from farm.jobs.cpu_schedules import legalize_dense
from farm.sampling import interleaved_rounds
from farm.zoo import MODELS, write_model

#: (label, PACKED_MAX_ROWS) per build; 0 switches the rule off.
BUILDS = (("unpacked", 0), ("gemv", 8), ("packed", legalize_dense.PACKED_MAX_ROWS))


def _builds(path: Path, shapes: dict[str, tuple[int, ...]], target: Any) -> dict[str, Any]:
    """label -> (VirtualMachine, args, feeds); the rule's constant is restored after."""
    import tvm
    from tvm import relax

    from farm.jobs.cpu_schedules.build import compile_cpu
    from farm.jobs.model import load_model, random_inputs, relax_module

    model, inputs = load_model(path, shapes)
    mod = relax_module(model, inputs)
    feeds = random_inputs(inputs, 0)
    saved = legalize_dense.PACKED_MAX_ROWS
    out = {}
    try:
        for label, rows in BUILDS:
            legalize_dense.PACKED_MAX_ROWS = rows
            vm = relax.VirtualMachine(compile_cpu(mod, target, None), tvm.cpu())
            out[label] = (vm, [tvm.runtime.tensor(feeds[i.name]) for i in inputs], feeds)
    finally:
        legalize_dense.PACKED_MAX_ROWS = saved
    return out


def main(argv: list[str] | None = None) -> int:
    """Build, check and time each model; print one Markdown table."""
    import tvm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--core", type=int, default=0)
    args = parser.parse_args(argv)
    target = one_core_target(args.core)
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}, core {args.core}")
    print("| model | build | ms (median) | /ORT median | /ORT range | max abs error |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            zoo = MODELS[name]
            path = write_model(zoo, Path(folder))
            builds = _builds(path, zoo.input_shapes(), target)
            session = ort_session(path)
            feeds = next(iter(builds.values()))[2]
            want = session.run(None, feeds)[0]
            errors = {}
            for label, (vm, inputs, _f) in builds.items():
                got = vm["main"](*inputs)
                got = got if hasattr(got, "numpy") else got[0]
                errors[label] = float(np.max(np.abs(got.numpy() - want)))

            def timer(vm: Any, inputs: list[Any]) -> Callable[[], list[float]]:
                evaluator = vm.time_evaluator("main", tvm.cpu(), number=5, repeat=1)
                return lambda: [evaluator(*inputs).mean * 1e3]

            times = interleaved_rounds(
                {"ort": lambda: [ort_sample_s(session, feeds, runs=5) * 1e3],  # noqa: B023
                 **{label: timer(vm, inputs) for label, (vm, inputs, _f) in builds.items()}},
                args.rounds)
            ort_ms = times.pop("ort")
            ratios = {k: [ms / o for ms, o in zip(v, ort_ms, strict=True)]
                      for k, v in times.items()}
            print(f"| {name} | onnxruntime | {statistics.median(ort_ms):.2f} | | | |")
            for label in builds:
                r = ratios[label]
                print(f"| {name} | {label} | {statistics.median(times[label]):.2f} | "
                      f"{statistics.median(r):.2f} | {min(r):.2f}-{max(r):.2f} | "
                      f"{errors[label]:.1e} |")
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
