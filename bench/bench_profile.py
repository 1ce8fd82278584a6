"""Per-kernel profile of a model against a local TVM RPC server (``model --profile``'s path).

Starts a tracker and one RPC server on loopback (standing in for a phone), runs
``farm.jobs.model.run_model`` with ``profile=True`` and prints the kernels,
heaviest first, and their sum against the whole model's time.

Reproduce::

    python bench/bench_profile.py                 # farm's small CNN
    python bench/bench_profile.py --model m.onnx --number 10
    python bench/bench_profile.py --model det_head.onnx --shape x=1,3,160,160 --threads 1
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from farm.demo_model import write_small_cnn
from farm.jobs.cache import CompileCache
from farm.jobs.local_cluster import LocalCluster
from farm.jobs.model import run_model
from farm.jobs.params import (
    DeviceFacts,
    ModelParams,
    ThreadPoolParams,
    TimingParams,
    TrackerParams,
)
from farm.jobs.targets import target_for

KEY = "bench-profile"


def main(argv: list[str] | None = None) -> int:
    """Run the profile once and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="ONNX file [default: farm's small CNN]")
    parser.add_argument("--number", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--shape", action="append", default=[], metavar="NAME=D,D,...",
                        help="an input's shape (symbolic dimensions need one), repeatable")
    parser.add_argument("--threads", type=int, default=None,
                        help="TVM thread pool threads, no core preference [default: the "
                             "runtime's, the host's cores]")
    args = parser.parse_args(argv)
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in args.shape:
        name, _, dims = spec.partition("=")
        try:
            shapes[name] = tuple(int(d) for d in dims.split(","))
        except ValueError:
            parser.error(f"--shape {spec}: expected NAME=D,D,... with integer dimensions")
    cores = args.threads or os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as folder:
        model = args.model or write_small_cnn(Path(folder) / "small_cnn.onnx")
        cluster = LocalCluster()
        try:
            cluster.start_tracker()
            cluster.add_servers(KEY, count=1)
            tracker = TrackerParams(cluster.host, cluster.port, KEY, 300, "local-rpc")
            facts = DeviceFacts(abi="x86_64", host_runtime=True, num_cores=cores)
            # The model job's tolerances (farm.kinds.model.Tolerance): float32 sums in
            # another order put ResNet-18's outputs (up to ~100) 1.4e-4 from onnxruntime's.
            params = ModelParams(model, shapes or None, profile=True, rtol=1e-3, atol=1e-3,
                                 timing=TimingParams(args.number, args.repeat, 100),
                                 threads=ThreadPoolParams() if args.threads is None else
                                 ThreadPoolParams(affinity_mode=0, num_threads=args.threads))
            result = run_model(params, target_for(facts), tracker,
                               CompileCache(Path(folder) / "cache"))
        finally:
            cluster.close()
    profile = result.profile
    assert profile is not None
    print(f"model {model.name}: {profile.model_ms:.4f} ms per inference; kernels sum "
          f"{profile.kernels_ms:.4f} ms ({100 * profile.ratio:.0f}%)")
    print(f"{'kernel':32} {'calls':>5} {'ms/call':>9} {'% of kernels':>12}")
    for k in profile.kernels:
        print(f"{k.name:32} {k.calls:5d} {k.per_call_ms:9.4f} {k.share_pct:12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
