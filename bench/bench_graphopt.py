"""farm's untuned CPU build of a real-export-shaped model with and without the graph passes.

The model is PP-LCNet-like (PaddleClas ``ppcls/arch/backbone/legendary_models/
pp_lcnet.py``, ``NET_CONFIG`` at scale 0.5, 224x224 input), written the way
paddle2onnx and torch.onnx export it: every ``Conv`` without a bias followed
by an unfolded ``BatchNormalization``, the activation in one of the three
forms exporters choose (``--hardswish op``: one ``HardSwish`` node;
``clip``: ``x * Clip(x + 3, 0, 6) / 6``; ``hardsigmoid``: ``x * HardSigmoid(x)``),
squeeze-excitation in the last two blocks (``HardSigmoid``), an ``Identity``
after each block and a no-op ``Reshape`` before the classifier.

Two builds of one file (:func:`farm.jobs.cpu_schedules.build.compile_cpu`,
the ``model`` job's CPU build), in one process pinned to one core, TVM at
1 thread and onnxruntime at 1 intra-op thread (``bench/_ort.py``):

- ``before``: the module as TVM's ONNX frontend imports it;
- ``after``: after :func:`farm.jobs.graph_passes.optimize`, as the ``model``
  job builds it today (:func:`farm.jobs.model.relax_module`).

Each build's output is checked against onnxruntime on the original file.
Then ``--rounds`` interleaved rounds (:func:`farm.sampling.interleaved_rounds`)
time onnxruntime and both builds (mean of 5 runs each); the table gives each
build's median and the median and range of its per-round ratio to
onnxruntime, its per-round ratio to ``before`` (the A/B itself), the number
of kernels the build runs, and whether its output matches onnxruntime's at
the ``model`` job's default tolerance (:class:`farm.jobs.params.ModelParams`).

Reproduce::

    python bench/bench_graphopt.py --rounds 15 --hardswish op clip hardsigmoid
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

from farm.jobs.params import ModelParams
from farm.sampling import interleaved_rounds

#: (kernel, in, out, stride, SE) per depthwise-separable block: PP-LCNet's NET_CONFIG at 0.5.
BLOCKS = ((3, 8, 16, 1, False), (3, 16, 32, 2, False), (3, 32, 32, 1, False),
          (3, 32, 64, 2, False), (3, 64, 64, 1, False), (3, 64, 128, 2, False),
          *((5, 128, 128, 1, False),) * 5, (5, 128, 256, 2, True), (5, 256, 256, 1, True))
FORMS = ("op", "clip", "hardsigmoid")


class _Net:
    """Nodes and seeded weights of the model under construction."""

    def __init__(self, hardswish: str) -> None:
        self.rng = np.random.default_rng(0)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.form = hardswish
        self.count = 0

    def const(self, values: Any, dtype: Any = np.float32) -> str:
        from onnx import numpy_helper

        self.count += 1
        name = f"c{self.count}"
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        from onnx import helper

        self.count += 1
        out = f"{op_type.lower()}{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv_bn(self, x: str, c_in: int, c_out: int, k: int, stride: int, group: int) -> str:
        w = self.rng.standard_normal((c_out, c_in // group, k, k)) * np.sqrt(
            2.0 / (c_in // group * k * k))
        y = self.op("Conv", [x, self.const(w)], kernel_shape=[k, k], strides=[stride] * 2,
                    pads=[k // 2] * 4, group=group)
        return self.op("BatchNormalization", [
            y, self.const(self.rng.uniform(0.5, 1.5, c_out)),
            self.const(self.rng.normal(0, 0.1, c_out)),
            self.const(self.rng.normal(0, 0.1, c_out)),
            self.const(self.rng.uniform(0.5, 1.5, c_out))])

    def hardswish(self, x: str) -> str:
        if self.form == "op":
            return self.op("HardSwish", [x])
        if self.form == "hardsigmoid":
            return self.op("Mul", [x, self.op("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)])
        clipped = self.op("Clip", [self.op("Add", [x, self.const(3.0)]), self.const(0.0),
                                   self.const(6.0)])
        return self.op("Div", [self.op("Mul", [x, clipped]), self.const(6.0)])

    def se(self, x: str, c: int) -> str:
        s = self.op("GlobalAveragePool", [x])
        w1 = self.rng.standard_normal((c // 4, c, 1, 1)) * np.sqrt(2.0 / c)
        s = self.op("Relu", [self.op("Conv", [s, self.const(w1), self.const(np.zeros(c // 4))])])
        w2 = self.rng.standard_normal((c, c // 4, 1, 1)) * np.sqrt(8.0 / c)
        s = self.op("Conv", [s, self.const(w2), self.const(np.zeros(c))])
        return self.op("Mul", [x, self.op("HardSigmoid", [s], alpha=1.0 / 6, beta=0.5)])


def pp_lcnet(hardswish: str) -> Any:
    """The checked ``onnx.ModelProto``: ``x[1, 3, 224, 224]`` -> ``y[1, 1000]``."""
    import onnx
    from onnx import TensorProto, helper

    net = _Net(hardswish)
    x = net.hardswish(net.conv_bn("x", 3, 8, 3, 2, 1))
    for k, c_in, c_out, stride, se in BLOCKS:
        x = net.hardswish(net.conv_bn(x, c_in, c_in, k, stride, c_in))
        if se:
            x = net.se(x, c_in)
        x = net.op("Identity", [net.hardswish(net.conv_bn(x, c_in, c_out, 1, 1, 1))])
    x = net.op("GlobalAveragePool", [x])
    head = net.rng.standard_normal((640, 256, 1, 1)) * np.sqrt(2.0 / 256)
    x = net.hardswish(net.op("Conv", [x, net.const(head), net.const(np.zeros(640))]))
    x = net.op("Reshape", [net.op("Flatten", [x]), net.const([1, 640], np.int64)])
    fc = net.rng.standard_normal((1000, 640)) * np.sqrt(1.0 / 640)
    y = net.op("Gemm", [x, net.const(fc), net.const(np.zeros(1000))], transB=1)
    graph = helper.make_graph(
        net.nodes, "pp_lcnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 1000])], initializer=net.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)],
                              producer_name="bench_graphopt")
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def _builds(path: Path, target: Any) -> dict[str, tuple[Any, int]]:
    """label -> (VirtualMachine, kernels in its fused module)."""
    import tvm
    from tvm import relax

    from farm.jobs.cpu_schedules.build import compile_cpu
    from farm.jobs.model import load_model, relax_module, tunable_module
    from farm.jobs.onnx_import import _from_onnx

    model, inputs = load_model(path)
    shapes = {i.name: list(i.shape) for i in inputs}
    mods = {"before": _from_onnx(model, shapes, {i.name: i.dtype for i in inputs}),
            "after": relax_module(model, inputs, path.name)}
    out = {}
    for label, mod in mods.items():
        kernels = sum(isinstance(f, tvm.tirx.PrimFunc)
                      for f in tunable_module(mod, target).functions.values())
        out[label] = (relax.VirtualMachine(compile_cpu(mod, target, None), tvm.cpu()), kernels)
    return out


def main(argv: list[str] | None = None) -> int:
    """Build, check and time each form; print one Markdown table."""
    import onnx
    import tvm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hardswish", nargs="*", default=list(FORMS), choices=FORMS)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--core", type=int, default=0)
    args = parser.parse_args(argv)
    target = one_core_target(args.core)
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}, core {args.core}")
    job = ModelParams(model_path=Path("model.onnx"))  # the job's default rtol and atol
    print("| HardSwish form | build | kernels | ms (median) | /ORT median | /ORT range "
          "| /before median (range) | max abs error | matches ORT |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for form in args.hardswish:
            path = Path(folder) / f"pp_lcnet_{form}.onnx"
            onnx.save(pp_lcnet(form), str(path))
            builds = _builds(path, target)
            session = ort_session(path)
            feeds = {"x": np.random.default_rng(0).standard_normal((1, 3, 224, 224))
                     .astype(np.float32)}
            want = session.run(None, feeds)[0]
            args_in = [tvm.runtime.tensor(feeds["x"])]
            got = {label: vm["main"](*args_in).numpy() for label, (vm, _k) in builds.items()}

            def timer(vm: Any) -> Callable[[], list[float]]:
                evaluator = vm.time_evaluator("main", tvm.cpu(), number=5, repeat=1)
                return lambda: [evaluator(*args_in).mean * 1e3]  # noqa: B023

            times = interleaved_rounds(
                {"ort": lambda: [ort_sample_s(session, feeds, runs=5) * 1e3],  # noqa: B023
                 **{label: timer(vm) for label, (vm, _k) in builds.items()}}, args.rounds)
            ort_ms = times.pop("ort")
            print(f"| {form} | onnxruntime | | {statistics.median(ort_ms):.2f} | | | | | |")
            for label, (_vm, kernels) in builds.items():
                r = [ms / o for ms, o in zip(times[label], ort_ms, strict=True)]
                ab = [ms / b for ms, b in zip(times[label], times["before"], strict=True)]
                error = float(np.max(np.abs(got[label] - want)))
                matches = np.allclose(got[label], want, rtol=job.rtol, atol=job.atol)
                print(f"| {form} | {label} | {kernels} | {statistics.median(times[label]):.2f} "
                      f"| {statistics.median(r):.2f} | {min(r):.2f}-{max(r):.2f} "
                      f"| {statistics.median(ab):.2f} ({min(ab):.2f}-{max(ab):.2f}) "
                      f"| {error:.1e} (output max {np.max(np.abs(want)):.1e}) "
                      f"| {'yes' if matches else 'no'} |")
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
