"""How far farm's untuned CPU builds are from the core's peak: the room a schedule search has.

A tuning can only make a kernel faster than farm's default schedule up to the
core's peak. This script measures, on one core at 1 thread:

- the core's fp32 peak: 16 independent chains of fused multiply-adds of
  16-float vectors, compiled with ``cc -O2 -march=native -ffp-contract=fast``
  (GFLOPS of the fastest of ``--runs`` runs), beside onnxruntime's MatMul of
  1024 x 1024 by 1024 x 1024 at 1 thread (MLAS), the best a library reaches;
- per zoo model (:mod:`farm.zoo`), its untuned build profiled kernel by
  kernel, the ``model --profile`` path (:func:`farm.jobs.model.run_model` on
  a local RPC server, as ``bench_profile.py``), with each kernel's FLOPs
  (:func:`farm.tuning.tasks.model_tasks`: TVM's ``estimate_tir_flops``; a
  kernel is matched to its task by name, the legalized ``_blocks_in``/
  ``_blocks_out`` suffixes dropped).

Per model it prints the whole model's time, its GFLOPS (its kernels' FLOPs
over that time) against the peak, the share of kernel time spent in kernels at 90% of
the peak or more, and **the least tuned/untuned any schedule could reach**:
the model's time with every kernel at the peak (a kernel's time at the peak
is its FLOPs / peak, the model's other time unchanged) over its time now. It
is a bound, and a generous one: a memory-bound kernel (a matrix-vector
product, a depthwise convolution) cannot reach the FLOP peak, and each
kernel is timed alone, its weights warm in cache, so the time a model run
spends reading them again is left as it is.

Reproduce::

    python bench/bench_roofline.py --core 1
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _ort import ort_bound, ort_sample_s, ort_session

from farm.jobs.cache import CompileCache
from farm.jobs.local_cluster import LocalCluster
from farm.jobs.model import run_model
from farm.jobs.model_graph import load_model, relax_module
from farm.jobs.params import DeviceFacts, ModelParams, ThreadPoolParams, TimingParams, TrackerParams
from farm.jobs.targets import target_for
from farm.tuning.tasks import model_tasks
from farm.zoo import MODELS, write_model

KEY = "bench-roofline"
#: The five models of issue 37's tuned goal.
ZOO_FIVE = ["mobilenet_v2", "mobilenet_v3_small", "resnet18", "det_head", "encoder_block"]
#: A kernel at this share of the peak or more counts as at the peak.
AT_PEAK = 0.9
#: The peak's MatMul: n x n by n x n.
PEAK_N = 1024


#: The FMA chains (see the module doc); prints GFLOPS.
FMA_C = r"""
#include <stdio.h>
#include <time.h>
typedef float v16 __attribute__((vector_size(64)));
int main(void) {
  v16 a[16], b, c;
  for (int l = 0; l < 16; l++) { b[l] = 1.0000001f; c[l] = 1e-7f; }
  for (int i = 0; i < 16; i++) for (int l = 0; l < 16; l++) a[i][l] = (float)(i + l);
  const long iters = 50000000L;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long n = 0; n < iters; n++) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) a[i] = a[i] * b + c;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
  float sum = 0;
  for (int i = 0; i < 16; i++) for (int l = 0; l < 16; l++) sum += a[i][l];
  printf("%.3f %g\n", iters * 16.0 * 16 * 2 / s / 1e9, sum);
  return 0;
}
"""


def fma_gflops(folder: Path, runs: int) -> float:
    """The FMA chains' GFLOPS on this process's core: the fastest of ``runs`` runs.

    Raises:
        subprocess.CalledProcessError: ``cc`` cannot build them (no compiler).
    """
    source, binary = folder / "fma.c", folder / "fma"
    source.write_text(FMA_C)
    subprocess.run(["cc", "-O2", "-march=native", "-ffp-contract=fast", "-o", str(binary),
                    str(source)], check=True)
    return max(float(subprocess.run([str(binary)], check=True, capture_output=True,
                                    text=True).stdout.split()[0]) for _ in range(runs))


def matmul_gflops(folder: Path, runs: int) -> float:
    """onnxruntime's MatMul PEAK_N^3 at 1 thread: GFLOPS of its fastest run."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.random((PEAK_N, PEAK_N), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "peak",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [PEAK_N, PEAK_N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [PEAK_N, PEAK_N])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 9  # onnxruntime reads IR 13 at most
    path = folder / "peak_matmul.onnx"
    onnx.save(model, str(path))
    session = ort_session(path)
    bound = ort_bound(session, {"x": rng.random((PEAK_N, PEAK_N), dtype=np.float32)})
    best = min(ort_sample_s(session, bound) for _ in range(runs))
    return 2 * PEAK_N**3 / best / 1e9


@dataclass(frozen=True)
class Room:
    """One model's figures (see the module doc)."""

    model_ms: float
    gflops: float
    at_peak_share: float
    least_ratio: float
    unmatched: int


def room(path: Path, shapes: dict[str, tuple[int, ...]], peak: float, folder: Path,
         cluster: LocalCluster, runs: int) -> Room:
    """Profile ``path``'s untuned build on the cluster's server; its room at ``peak`` GFLOPS."""
    facts = DeviceFacts(abi="x86_64", host_runtime=True, num_cores=1)
    target = target_for(facts)
    onnx_model, inputs = load_model(path, shapes, path.name)
    flops = {t.name: t.flop for t in model_tasks(relax_module(onnx_model, inputs, path.name),
                                                 target)}
    tracker = TrackerParams(cluster.host, cluster.port, KEY, 300, "local-rpc")
    params = ModelParams(path, shapes, profile=True, rtol=1e-3, atol=1e-3,
                         timing=TimingParams(10, runs, 100),
                         threads=ThreadPoolParams(affinity_mode=0, num_threads=1))
    profile = run_model(params, target, tracker, CompileCache(folder / "cache")).profile
    assert profile is not None
    compute_flop = saved_ms = at_peak_ms = 0.0
    unmatched = 0
    for kernel in profile.kernels:
        # The channel-block handoff renames a kernel NAME_blocks[_in][_out]
        # (farm/jobs/cpu_schedules/handoff.py); its task keeps NAME.
        base = re.sub(r"_blocks(_in)?(_out)?$", "", kernel.name)
        flop = flops.get(base)
        if flop is None:
            unmatched += 1
            continue
        compute_flop += flop * kernel.calls
        at_peak_s = flop / (peak * 1e9)
        saved_ms += kernel.calls * max(0.0, kernel.per_call_ms - 1e3 * at_peak_s)
        if flop and flop / (kernel.per_call_ms * 1e6) >= AT_PEAK * peak:
            at_peak_ms += kernel.total_ms
    return Room(profile.model_ms, compute_flop / (profile.model_ms * 1e6),
                at_peak_ms / profile.kernels_ms, (profile.model_ms - saved_ms) / profile.model_ms,
                unmatched)


def main(argv: list[str] | None = None) -> int:
    """Measure the peak, then each model's room; print one Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=ZOO_FIVE, choices=list(MODELS))
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--runs", type=int, default=10,
                        help="the peak's MatMul runs, and samples of each kernel")
    args = parser.parse_args(argv)
    os.environ["TVM_NUM_THREADS"] = "1"
    os.environ["TVM_BIND_THREADS"] = "0"  # else TVM moves its thread to the first core it sorts
    os.sched_setaffinity(0, {args.core})  # the RPC server started below inherits it
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}, core {args.core}")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        peak, matmul = fma_gflops(folder, args.runs), matmul_gflops(folder, args.runs)
        print(f"peak: FMA chains {peak:.0f} GFLOPS; onnxruntime MatMul {PEAK_N}^3 at 1 thread "
              f"{matmul:.0f} GFLOPS ({matmul / peak:.0%})\n")
        print("| model | untuned ms | GFLOPS (of peak) | kernel time at >= "
              f"{AT_PEAK:.0%} of peak | least tuned/untuned |")
        print("|---|---|---|---|---|")
        cluster = LocalCluster()
        try:
            cluster.start_tracker()
            cluster.add_servers(KEY, count=1)
            for model in args.models:
                zoo = MODELS[model]
                r = room(write_model(zoo, folder), zoo.input_shapes(), peak, folder, cluster,
                         args.runs)
                note = f" ({r.unmatched} kernels unmatched)" if r.unmatched else ""
                print(f"| {model} | {r.model_ms:.2f} | {r.gflops:.0f} ({r.gflops / peak:.0%}) | "
                      f"{r.at_peak_share:.0%} | {r.least_ratio:.2f}{note} |")
        finally:
            cluster.close()
    print(f"\nload average {' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
