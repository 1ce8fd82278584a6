"""Two commits' untuned CPU builds of the zoo, timed alternately in one process against onnxruntime.

A change to farm's default CPU schedules moves a model's latency by a few
percent, well inside what a shared host's load moves it between two runs of
``bench/bench_zoo.py``. Here each commit's ``farm`` (``git archive`` into a
temporary folder) builds the zoo's untuned libraries in a process of its own,
then this process loads both and times onnxruntime (inputs and outputs bound,
as TVM times its runs), before and after in
turn, ``--rounds`` times, on one pinned core with 1 thread each (real-time
priority where the host allows it, as ``bench_zoo``'s phone process), so
that every round sees the same load. Prints, per model, the medians and ranges,
after/before (median and least), and each build's max abs error against
onnxruntime.

Reproduce::

    python bench/bench_ab_untuned.py --before 8665ec6 --after HEAD --rounds 25 --core 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _ort import ort_bound, ort_sample_s, ort_session

from farm.virtual.throttle import QUIET_RT_PRIORITY, realtime
from farm.zoo import MODELS

TAGS = ("before", "after")


def build(out_dir: Path, models: list[str]) -> None:
    """Write ``<model>.onnx`` and its untuned library ``<model>.so`` to ``out_dir`` (this farm)."""
    import tvm

    from farm.jobs.cpu_schedules.build import compile_cpu
    from farm.jobs.model import load_model, relax_module
    from farm.jobs.params import DeviceFacts
    from farm.jobs.targets import target_for
    from farm.zoo import write_model

    target = tvm.target.Target(target_for(DeviceFacts(abi="x86_64", host_runtime=True,
                                                      num_cores=1)))
    for name in models:
        path = write_model(MODELS[name], out_dir)
        model, inputs = load_model(path, MODELS[name].input_shapes())
        compile_cpu(relax_module(model, inputs), target, None).export_library(
            str(out_dir / f"{name}.so"))


def time_model(name: str, dirs: dict[str, Path], rounds: int) -> str:
    """One table row: onnxruntime and both builds timed in turn, ``rounds`` times."""
    import numpy as np
    import tvm
    from tvm import relax

    from farm.sampling import interleaved_rounds  # here: a --build child imports an older farm

    shapes = MODELS[name].input_shapes()
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(v).astype("float32") for k, v in shapes.items()}
    session = ort_session(dirs["before"] / MODELS[name].file_name())
    want = session.run(None, feeds)
    timers, errors = {}, {}
    for tag in TAGS:
        vm = relax.VirtualMachine(tvm.runtime.load_module(str(dirs[tag] / f"{name}.so")),
                                  tvm.cpu())
        args = [tvm.runtime.tensor(v) for v in feeds.values()]
        out = vm["main"](*args)
        outs = [out] if hasattr(out, "numpy") else list(out)
        errors[tag] = max(float(np.max(np.abs(o.numpy() - w))) for o, w in zip(outs, want,
                                                                               strict=True))
        timers[tag] = (vm.time_evaluator("main", tvm.cpu(), number=10, repeat=1), args)

    def timer(tag: str) -> Callable[[], list[float]]:
        evaluator, args = timers[tag]
        return lambda: [evaluator(*args).mean * 1e3]

    bound = ort_bound(session, feeds)  # as TVM times its runs: no copies in or out
    ms = interleaved_rounds({"ort": lambda: [ort_sample_s(session, bound, runs=10) * 1e3],
                             **{tag: timer(tag) for tag in TAGS}}, rounds)
    med = {k: float(np.median(v)) for k, v in ms.items()}
    span = {k: f"{min(v):.2f}-{max(v):.2f}" for k, v in ms.items()}
    return (f"| {name} | {med['ort']:.2f} ({span['ort']}) | {med['before']:.2f} ({span['before']}) "
            f"| {med['after']:.2f} ({span['after']}) | {med['after'] / med['before']:.2f}; "
            f"{min(ms['after']) / min(ms['before']):.2f} | {errors['before']:.1e} / "
            f"{errors['after']:.1e} |")


def main(argv: list[str] | None = None) -> int:
    """Build both commits, time them alternately, print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="HEAD~1", help="git revision [default: HEAD~1]")
    parser.add_argument("--after", default="HEAD", help="git revision [default: HEAD]")
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--core", type=int, default=1, help="the core both run on")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)  # the child's mode
    args = parser.parse_args(argv)
    if args.build is not None:
        build(args.build, args.models)
        return 0
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as folder:
        dirs = {}
        for tag, rev in zip(TAGS, (args.before, args.after), strict=True):
            src = Path(folder) / tag
            src.mkdir()
            archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "farm"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
            dirs[tag] = src / "out"
            dirs[tag].mkdir()
            env = {**os.environ, "PYTHONPATH": str(src)}
            subprocess.run([sys.executable, __file__, "--build", str(dirs[tag]), "--models",
                            *args.models], check=True, env=env, cwd=src)
        favoured = realtime(os.getpid(), QUIET_RT_PRIORITY)  # as bench_zoo's phone process
        import tvm

        tvm.get_global_func("runtime.config_threadpool")(0, 1)
        # After the thread pool: its affinity mode 0 pins this thread to the "big" cores as
        # TVM sorts them (core 0 on a 2-core host), not to --core.
        os.sched_setaffinity(0, {args.core})
        print(f"host: {os.cpu_count()} cores, load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; core {args.core}, 1 thread"
              f"{', real-time priority' if favoured else ''}")
        print("| model | ORT ms (range) | before ms (range) | after ms (range) "
              "| after/before (median; least) | max abs error vs ORT before / after |")
        print("|---|---|---|---|---|---|")
        for name in args.models:
            print(time_model(name, dirs, args.rounds), flush=True)
    print(f"reproduce: python bench/bench_ab_untuned.py --before {args.before} --after "
          f"{args.after} --rounds {args.rounds} --core {args.core}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
