"""The zoo on one virtual phone against onnxruntime on the same core: untuned, tuned, ratios.

For each zoo model and exporter-shaped variant (:mod:`farm.zoo`; the
variants' rows name their exporter) in one run, on one virtual phone's RPC
process (:func:`farm.virtual.testing.rpc_app`, real-time priority where the
host allows it) pinned to one core, with TVM's thread pool at 1 thread:

- onnxruntime, 1 intra-op thread, in this process pinned to the same core
  (and given the same priority while it is timed), with its inputs and
  outputs bound (IOBinding, :func:`_ort.ort_bound`), as TVM's timing
  excludes the copies in and out; the plain ``session.run`` figure, copies
  included, is shown beside it;
- the ``model`` job's build and measurement (:func:`farm.jobs.model.run_model`):
  the untuned latency (farm's default CPU schedules), timed with onnxruntime
  (bound and with its copies) in ``--rounds`` interleaved rounds
  (:func:`farm.sampling.interleaved_rounds`), so that the sides of a ratio
  see the same load;
- for the models in ``--tune`` (default: the first one), the ``tune`` job's
  code path (:func:`farm.tuning.model.tune_model`) with ``--trials``
  measured trials (each task's pick checked against its default schedule:
  "k/n picks used"), then onnxruntime, ``run_model`` untuned and
  ``run_model`` with its database timed again in ``--rounds`` interleaved
  rounds once the builders are gone, so all three figures see the same host
  (on a shared host its load moves by tens of percent between the start of a
  run and its end): the tuned build's own latency ("untuned kept" where it
  was not faster than the untuned one, so that the tune job keeps the
  untuned build; "no record applied" where no pick was used, so that the
  tuned build is the untuned library and the two figures differ by noise),
  the time to the first measured trial, measured trials per phone-hour and
  their share of the measurement-bound limit (3600 s over the mean time the
  phone spent running one candidate, ``number`` x ``repeat`` x its mean run
  time; uploads not counted).

Latencies are medians of ``--samples`` samples a round; the ratios divide by
onnxruntime's (bound) median. Prints one table (Markdown) and the host load.

Reproduce::

    python bench/bench_zoo.py --trials 16 --tune mobilenet_v3_small
    python bench/bench_zoo.py --tune --core 5   # untuned only, on core 5 (benches side by side)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _ort import ort_bound, ort_sample_s, ort_session

from farm.jobs.cache import CompileCache
from farm.jobs.model import ModelInput, random_inputs, run_model
from farm.jobs.params import (
    DeviceFacts,
    ModelParams,
    ThreadPoolParams,
    TimingParams,
    TrackerParams,
    TuneParams,
)
from farm.jobs.targets import target_for
from farm.jobs.tuning_db import RECORDS_FILE
from farm.sampling import interleaved_rounds
from farm.tuning import TuneProgress, tune_model
from farm.virtual.testing import rpc_app
from farm.virtual.throttle import QUIET_RT_PRIORITY, realtime
from farm.zoo import MODELS, write_model

#: The core the phone's process and onnxruntime share unless ``--core`` names another.
DEFAULT_CORE = 0


@dataclass
class Row:
    """One model's figures (seconds; None where not measured)."""

    model: str
    exporter: str | None
    shape: tuple[int, ...]
    ort_s: float
    untuned_s: float
    ort_copies_s: float | None = None
    tuned_s: float | None = None
    trials: int | None = None
    first_trial_s: float | None = None
    trials_per_hour: float | None = None
    limit_per_hour: float | None = None
    picks: str = ""
    untuned_best: bool = False
    same_build: bool = False


class _FirstTrial(TuneProgress):
    """Tune progress that notes when the first trial was measured."""

    def __init__(self, work_dir: Path) -> None:
        super().__init__(work_dir)
        self.started = time.monotonic()
        self.first_s: float | None = None

    def update_task(self, name: str, trials_measured: int, best_s: float) -> None:
        if self.first_s is None and trials_measured > 0:
            self.first_s = time.monotonic() - self.started
        super().update_task(name, trials_measured, best_s)


@contextlib.contextmanager
def _pinned_realtime(core: int) -> Iterator[None]:
    """This process on ``core`` and, where allowed, real-time, like the phone's process."""
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    favoured = realtime(os.getpid(), QUIET_RT_PRIORITY)
    try:
        yield
    finally:
        if favoured:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.sched_setaffinity(0, affinity)


def ort_samples(path: Path, inputs: list[ModelInput], seed: int, samples: int,
                min_repeat_s: float, core: int = DEFAULT_CORE,
                bound: bool = True) -> list[float]:
    """onnxruntime (:mod:`_ort`) on ``core``: 3 runs to warm up, then ``samples`` samples.

    ``bound``: inputs and outputs bound (IOBinding), as TVM times its runs;
    else ``session.run`` with its copies.
    """
    session = ort_session(path)
    feeds = random_inputs(inputs, seed)
    runs = ort_bound(session, feeds) if bound else feeds
    with _pinned_realtime(core):
        ort_sample_s(session, runs, runs=3)
        return [ort_sample_s(session, runs, min_repeat_s=min_repeat_s) for _ in range(samples)]


def _limit_per_hour(work_dir: Path, timing: TimingParams) -> float | None:
    """3600 s over the mean phone time of one measured candidate (number x repeat x mean)."""
    costs = []
    for line in (work_dir / RECORDS_FILE).read_text().splitlines():
        with contextlib.suppress(ValueError, IndexError, TypeError):
            secs = [float(s) for s in json.loads(line)[1][1]]
            if secs and all(s < 1e9 for s in secs):
                costs.append(timing.number * len(secs) * statistics.mean(secs))
    return 3600.0 / statistics.mean(costs) if costs else None


def _tune(row: Row, path: Path, model: ModelParams, budget: argparse.Namespace,
          root: Path, target: dict[str, Any], tracker: TrackerParams,
          cache: CompileCache) -> None:
    """Tune, then time the untuned and the tuned build back to back; fill ``row``.

    The row's tuned figure is the tuned build's own median. As the tune job
    does (:func:`farm.kinds.tune_model.run_model_tuning`), where it is not
    faster than the untuned build timed in the same rounds, the untuned build
    is kept (``keep_untuned``) and the row says so.
    """
    from dataclasses import replace

    from farm.jobs.ndk import linker_for
    from farm.tuning import keep_untuned

    work_dir = root / f"tune-{path.stem}"
    params = TuneParams(gemm=None, model=model, trials=budget.trials, work_dir=work_dir,
                        trials_per_iter=min(budget.trials_per_iter, budget.trials), seed=0,
                        for_s=budget.for_s, builder_workers=budget.builder_workers)
    progress = _FirstTrial(work_dir)
    start = time.monotonic()
    result = tune_model(params, target, tracker, cache, progress)
    tuning_s = time.monotonic() - start
    timed = interleaved_rounds({  # the three see the same host
        "untuned": lambda: run_model(model, target, tracker, cache).samples_s,
        "ort": lambda: ort_samples(path, result.inputs, model.seed, budget.samples, 0.1,
                                   budget.core),
        "tuned": lambda: run_model(replace(model, database_dir=work_dir), target, tracker,
                                   cache).samples_s,
    }, budget.rounds)
    row.ort_s, row.untuned_s = statistics.median(timed["ort"]), statistics.median(timed["untuned"])
    row.tuned_s = statistics.median(timed["tuned"])  # its own, even where slower
    row.same_build = result.picks_used == 0  # the applied database is empty
    row.untuned_best = row.same_build or row.tuned_s >= row.untuned_s
    if row.untuned_best:
        keep_untuned(model, target, work_dir, cache, linker_for(target))
    row.trials = result.trials_measured
    row.first_trial_s = progress.first_s
    row.trials_per_hour = result.trials_measured / tuning_s * 3600.0
    row.limit_per_hour = _limit_per_hour(work_dir, params.timing)
    row.picks = f"{result.picks_used}/{result.picks_checked} picks used" + (
        f", {result.picks_unchecked} unchecked" if result.picks_unchecked else "")


def _untuned(name: str, exporter: str | None, path: Path, model: ModelParams,
             budget: argparse.Namespace, target: dict[str, Any], tracker: TrackerParams,
             cache: CompileCache) -> Row:
    """Build and check the untuned library, then time it and onnxruntime in interleaved rounds.

    ``budget.rounds`` rounds of the untuned build, onnxruntime bound and
    onnxruntime with its copies (:func:`farm.sampling.interleaved_rounds`), so
    that the sides of a ratio see the same load; each figure is the median of
    its rounds' samples.
    """
    inputs = run_model(model, target, tracker, cache).inputs  # built, outputs checked
    timed = interleaved_rounds({
        "untuned": lambda: run_model(model, target, tracker, cache).samples_s,
        "ort": lambda: ort_samples(path, inputs, model.seed, budget.samples, 0.1, budget.core),
        "copies": lambda: ort_samples(path, inputs, model.seed, budget.samples, 0.1,
                                      budget.core, bound=False),
    }, budget.rounds)
    shape = (model.input_shapes or {}).get("x", ())
    return Row(name, exporter, tuple(shape), statistics.median(timed["ort"]),
               statistics.median(timed["untuned"]),
               ort_copies_s=statistics.median(timed["copies"]))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.2f}"


def print_table(rows: list[Row], budget: str) -> None:
    """The Markdown table of the module doc; ``budget`` names the tuning budget."""
    print("| model | exporter | input | ORT ms (bound) | ORT ms (copies) | untuned ms | "
          f"untuned/ORT | tuned ms ({budget}) | tuned/ORT | tuned/untuned | first trial s | "
          "trials/phone-hour | of limit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        tuned_ratio = "-" if r.tuned_s is None else f"{r.tuned_s / r.ort_s:.2f}"
        tuned_gain = "-" if r.tuned_s is None else f"{r.tuned_s / r.untuned_s:.2f}"
        first = "-" if r.first_trial_s is None else f"{r.first_trial_s:.0f}"
        per_hour = "-" if r.trials_per_hour is None else f"{r.trials_per_hour:.0f}"
        share = ("-" if r.trials_per_hour is None or not r.limit_per_hour
                 else f"{r.trials_per_hour / r.limit_per_hour * 100:.1f}%")
        tuned = _ms(r.tuned_s)
        if r.trials is not None:
            kept = (", no record applied: the untuned library" if r.same_build
                    else ", untuned kept" if r.untuned_best else "")
            tuned = f"{tuned} ({r.trials} measured, {r.picks}{kept})"
        print(f"| {r.model} | {r.exporter or '-'} | {list(r.shape)} | {_ms(r.ort_s)} | "
              f"{_ms(r.ort_copies_s)} | {_ms(r.untuned_s)} | {r.untuned_s / r.ort_s:.2f} | "
              f"{tuned} | {tuned_ratio} | {tuned_gain} | {first} | {per_hour} | {share} |")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--tune", nargs="*", default=[next(iter(MODELS))], choices=list(MODELS),
                        help="models also tuned (none: --tune with no name)")
    parser.add_argument("--trials", type=int, default=16, help="measured trials per tuned model")
    parser.add_argument("--for-s", type=float, default=None,
                        help="tuning seconds per tuned model (stops before --trials if shorter)")
    parser.add_argument("--builder-workers", type=int, default=1,
                        help="build processes while tuning (more on a host with idle cores)")
    parser.add_argument("--trials-per-iter", type=int, default=8,
                        help="candidates measured per search round (more keep more builders busy)")
    parser.add_argument("--samples", type=int, default=7, help="latency samples per figure")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds of onnxruntime and untuned (and, after tuning, "
                             "tuned)")
    parser.add_argument("--small", action="store_true", help="the models' small forms")
    parser.add_argument("--core", type=int, default=DEFAULT_CORE,
                        help="the core the phone process and onnxruntime share (several benches "
                             "side by side on a many-core host: one core each)")
    args = parser.parse_args(argv)
    if not 0 <= args.core < (os.cpu_count() or 1):
        # Not this process's affinity: the bench may run under taskset on other cores
        # (its builders) while the phone and onnxruntime take --core.
        parser.error(f"--core {args.core}: this host has cores 0-{(os.cpu_count() or 1) - 1}")

    from farm import logs

    logs.configure(json=True, level="warning", stream=sys.stderr)
    timing = TimingParams(number=3, repeat=args.samples, min_repeat_ms=100)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="farm-bench-zoo-") as tmp:
        root = Path(tmp)
        cache = CompileCache(root / "cache")
        # The phone's sessions set their thread pool as a job's do (config_threadpool), and
        # TVM then pins the thread to the first core it sorts (core 0), not --core, where
        # onnxruntime runs; TVM_BIND_THREADS=0 (threading_backend.cc) leaves the affinity.
        os.environ["TVM_BIND_THREADS"] = "0"
        with rpc_app(root, key="bench-zoo", quiet=True) as app:
            os.sched_setaffinity(app.process.pid, {args.core})  # its session processes inherit it
            tracker = TrackerParams(app.tracker_host, app.tracker_port, app.key,
                                    session_timeout_s=3600, serial="virtual")
            # The virtual phone's target as the model job gets it (host CPU, its vector
            # extensions), one core.
            target = target_for(DeviceFacts(abi="x86_64", host_runtime=True, num_cores=1))
            for name in args.models:
                zoo = MODELS[name]
                path = write_model(zoo, root / "zoo", args.small)
                shapes = zoo.input_shapes(args.small)
                # float32 sums in another order: ResNet-18's outputs reach ~100, so
                # the job's default atol 1e-5 is below their rounding.
                model = ModelParams(path, shapes, rtol=1e-3, atol=1e-3, timing=timing,
                                    threads=ThreadPoolParams(affinity_mode=0, num_threads=1))
                row = _untuned(name, zoo.exporter, path, model, args, target, tracker, cache)
                if name in args.tune:
                    _tune(row, path, model, args, root, target, tracker, cache)
                rows.append(row)
                print(f"{name}: ORT {_ms(row.ort_s)} ms, untuned {_ms(row.untuned_s)} ms, "
                      f"tuned {_ms(row.tuned_s)} ms", file=sys.stderr, flush=True)
            favoured = app.favoured
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f}; phone process and onnxruntime on core {args.core}, 1 thread each, "
          f"{'real-time priority' if favoured else 'normal priority (no CAP_SYS_NICE)'}")
    budget = f"--trials {args.trials}" + ("" if args.for_s is None else f", --for-s {args.for_s:g}")
    print_table(rows, budget)
    print("reproduce: python bench/bench_zoo.py " + shlex.join(sys.argv[1:] if argv is None
                                                              else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
