"""Measured trials per phone-hour of a model tune: search, build and measure in turns, or pipelined.

Tunes the small CNN (``farm.demo_model``) with farm's tuning code
(:func:`farm.tuning.model.tune_model`) against RPC servers on this host
(:class:`farm.jobs.local_cluster.LocalCluster`, each one "phone"), for
``--for`` seconds a run, in pairs of runs taken in turns, each from an empty
work folder:

- ``turns``: farm's earlier behaviour, ``jobs.tune_pipeline = false`` and
  ``jobs.tune_builder_workers = 1``: a batch is searched, built in one
  process, then measured, before the next is searched;
- ``cores``: farm's default now, ``jobs.tune_pipeline = false`` and the
  default builders (the host's free cores, :mod:`farm.tuning.cores`), in turns;
- ``pipelined``: ``jobs.tune_pipeline = true`` and the default builders, a
  batch built while the next is searched
  (:mod:`farm.tuning.builder`) by the host's free cores
  (:mod:`farm.tuning.cores`);
- ``before``: ``cores`` with the search farm had until 2026-12-03
  (:func:`before_search`, :func:`_before_search_of`): each search proposes
  one batch, from MetaSchedule's population of 512 in 4 genetic rounds for a
  task of 512 trials or more, 2 per trial below, evolved from the first
  batch on, XGBoost trained on every batch;
- ``filed``: the loop when issue 37 was filed, ``turns`` with ``before``'s
  search: one build process, a batch searched, built and measured before the
  next is searched;
- ``after``: farm's defaults now (``cores`` with
  :func:`farm.tuning.search.search_settings`: one search proposes several
  batches, :data:`farm.tuning.search.SEARCH_CANDIDATES`; while the cost
  model scores at random, a search only samples a batch:
  :func:`farm.tuning.search.FarmSearch`), each runner worker's session kept
  for its next candidate (:mod:`farm.tuning.kept_session`; ``before`` and
  ``filed`` open one per candidate, as farm did until 2026-12-04).

Each run prints its measured trials, tuning seconds, trials per phone-hour
(:func:`farm.tuning.rate.trials_per_phone_hour`) and the load average;
the end prints each side's median and their ratio. The RPC servers share the
host's cores with the search and builds, so on a small host the figures
compare the two loops, not phones.

``--kind gpu`` tunes for ``cuda`` on this host's first GPU (its arch read
through NVML as farm's GPU controller reads it), for a GPU host.

The first line gives the host's cores and load; compare ``before`` and
``after`` on a host with 8 or more idle cores with the same command.

Reproduce::

    python bench/bench_tune_speed.py --pairs 2 --for 120 --sides before after
    python bench/bench_tune_speed.py --pairs 1 --for 120 --sides filed before after
    python bench/bench_tune_speed.py --pairs 2 --for 120
    python bench/bench_tune_speed.py --kind gpu --pairs 2 --for 240
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from farm import composition
from farm.demo_model import write_small_cnn
from farm.errors import CompileError
from farm.jobs.cache import CompileCache
from farm.jobs.local_cluster import LocalCluster
from farm.jobs.params import DeviceFacts, DeviceKind, ModelParams, TrackerParams, TuneParams
from farm.jobs.targets import target_for
from farm.jobs.tuning_db import default_and_best_s
from farm.tuning import held_builders, run, tune_model
from farm.tuning.rounds import warmup_samples
from farm.tuning.search import SearchSettings

KEY = "bench-tune-speed"
#: The loops compared (the module docstring says what each is).
SIDES = ("turns", "cores", "pipelined", "before", "filed", "after")


def before_search(trials_per_task: int) -> SearchSettings:
    """The search sizes of farm until 2026-12-03: one batch a search (``candidates`` 1)."""
    if trials_per_task >= 512:
        return SearchSettings(512, 0.2, 50, 4, 1)
    population = min(512, max(64, 2 * trials_per_task))
    rounds = 2 if trials_per_task < 64 else 3
    return SearchSettings(population, 0.3, max(16, population // 4), rounds, 1)


def _before_cost_model(trials: int | None = None) -> Any:
    """MetaSchedule's ``XGBModel`` as farm made it until 2026-12-03 (trained on every batch)."""
    from tvm.s_tir import meta_schedule as ms

    return ms.cost_model.XGBModel(num_warmup_samples=warmup_samples(trials or 0))


@contextlib.contextmanager
def _search_of(side: str) -> Any:
    """The ``before`` and ``filed`` sides' search in :mod:`farm.tuning.run` for the block.

    Their search sizes (:func:`before_search`), a cost model trained on every
    batch, and the evolution from the first batch (never cold).
    """
    now = run.search_settings, run.cost_model, run.cost_model_cold
    if side in ("before", "filed"):
        run.search_settings = before_search
        run.cost_model = _before_cost_model
        run.cost_model_cold = lambda _model: lambda: False
    try:
        yield
    finally:
        run.search_settings, run.cost_model, run.cost_model_cold = now


def _target(kind: str) -> tuple[dict[str, Any], DeviceKind]:
    """The target of this host's CPU (as a virtual phone reports it) or its first GPU."""
    if kind == "cpu":
        facts = DeviceFacts(abi="x86_64", host_runtime=True, num_cores=os.cpu_count() or 1)
        return target_for(facts), DeviceKind.CPU
    from farm.config import GpuSettings, Settings
    from farm.controllers.gpu import GpuController
    from farm.gpu.nvml import PynvmlReader

    ctrl = GpuController(Settings(gpu=GpuSettings(enabled=True)), PynvmlReader())
    facts = ctrl.facts(ctrl.discover()[0].serial)
    return ctrl.compile_target(facts, "cuda").target, DeviceKind.CUDA


def _best_over_default(work_dir: Path, tasks: int) -> float:
    """The tasks' geometric mean of best record over default schedule (a task not beaten: 1).

    Each from the median of its records' repeats
    (:func:`farm.jobs.tuning_db.default_and_best_s`): how far the search got.
    """
    ratios = [statistics.median(best) / statistics.median(first)
              for first, best in default_and_best_s(work_dir).values()]
    ratios += [1.0] * max(0, tasks - len(ratios))
    return statistics.geometric_mean(ratios) if ratios else 1.0


def _run(side: str, base: TuneParams, root: Path, target: dict[str, Any],
         tracker: TrackerParams, cache: CompileCache, n: int) -> float | None:
    work_dir = root / f"{side}-{n}"
    pipelined = side == "pipelined"
    one_builder = side in ("turns", "filed")
    with (held_builders(root / "tune-cores", 1 if one_builder else 0) as builders,
          _search_of(side)):
        params = replace(base, work_dir=work_dir, pipeline=pipelined, builder_workers=builders,
                         keep_sessions=side not in ("before", "filed"))
        start = time.monotonic()
        try:
            result = tune_model(params, target, tracker, cache)
        except CompileError as exc:  # the budget ran out before a trial was measured
            print(f"{side:<10} builders {builders:>2}  {exc}  load {os.getloadavg()[0]:.2f}",
                  flush=True)
            return None
    load = os.getloadavg()[0]
    print(f"{side:<10} builders {builders:>2}  measured {result.trials_measured:>4}  "
          f"tuning {result.tuning_s:6.1f} s  wall {time.monotonic() - start:6.1f} s  "
          f"per phone-hour {result.trials_per_phone_hour or 0:7.0f}  "
          f"first trial {result.first_trial_s or 0:5.1f} s  "
          f"best/default {_best_over_default(work_dir, len(result.tasks)):.3f}  load {load:.2f}",
          flush=True)
    return result.trials_per_phone_hour


def main(argv: list[str] | None = None) -> int:
    """Run the pairs and print the table; 0 on success."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--phones", type=int, default=1, help="RPC servers measuring")
    parser.add_argument("--pairs", type=int, default=2, help="runs of each side, in turns")
    parser.add_argument("--for", dest="for_s", type=float, default=120.0,
                        help="tuning seconds per run; 0: until --trials are measured")
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--max-tasks", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16, help="trials per batch")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES),
                        help="loops to compare, each run in turns with the others")
    args = parser.parse_args(argv)

    target, device = _target(args.kind)
    cluster = LocalCluster()
    with tempfile.TemporaryDirectory(prefix="bench-tune-speed-") as tmp:
        root = Path(tmp)
        model = write_small_cnn(root / "small_cnn.onnx")
        base = TuneParams(gemm=None, model=ModelParams(model_path=model, device=device),
                          trials=args.trials, work_dir=root, trials_per_iter=args.batch,
                          runner_workers=args.phones, max_tasks=args.max_tasks,
                          for_s=args.for_s or None, seed=1)
        try:
            cluster.start_tracker(deadline_s=180.0)  # a loaded host starts it slowly
            cluster.add_servers(KEY, count=args.phones, deadline_s=300.0,
                                no_fork=args.kind == "gpu")
            tracker = TrackerParams(host=cluster.host, port=cluster.port, key=KEY,
                                    session_timeout_s=120, serial="bench", connect_timeout_s=60)
            cache = CompileCache(root / "cache")
            print(f"{args.kind}, {os.cpu_count()} cores, {args.phones} phone(s), "
                  f"--for {args.for_s:g} s, load {os.getloadavg()[0]:.2f}", flush=True)
            rates: dict[str, list[float]] = {side: [] for side in args.sides}
            for n in range(args.pairs):
                for side in args.sides if n % 2 == 0 else args.sides[::-1]:
                    rate = _run(side, base, root, target, tracker, cache, n)
                    if rate:
                        rates[side].append(rate)
        finally:
            cluster.close()
    medians = {side: statistics.median(r) for side, r in rates.items() if r}
    first = next(iter(medians), None)
    print("median trials per phone-hour: " + ", ".join(
        f"{side} {rate:.0f}" + (f" ({rate / medians[first]:.2f}x {first})"
                                if first is not None and side != first else "")
        for side, rate in medians.items()) + f"; load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
