"""farmctl's own cost: start time of a command, and ``enqueue && wait`` against a hand script.

::

    python bench/bench_cli.py                  # starts: median of 10; GEMM 512, 3 runs each way
    python bench/bench_cli.py --starts 20 --runs 5
    python bench/bench_cli.py --before /path/to/main/.venv/bin/farmctl   # starts before/after

One virtual phone, provisioned by farmd (in-process, :func:`farm.cli.demo.demo_farmd`).

* **start**: wall time of ``farmctl --version``, ``farmctl jobs`` and ``farmctl
  devices`` as a user runs them (the console script, a new process each time,
  on farmd's database), median of ``--starts`` (goal < 0.3 s on an idle host);
  with ``--before``, another tree's farmctl alternately, on the same load. Their
  CPU seconds too: on a busy host the wall time is mostly waiting for a core.
* **enqueue && wait**: ``farmctl enqueue gemm --n N`` then ``farmctl wait ID``,
  two processes as a shell would run them, from the first one's start to the
  second one's exit; against the same GEMM by a hand-written tracker script
  (bench_overhead.py's :data:`SCRIPT`: import TVM, build, request the phone's
  key, upload, check, ``time_evaluator``), alternating, after one warm-up run
  of each (goal: farmctl at most 1.1x the script). Both measure alike
  (:data:`SCRIPT_TIMING`), unless ``--farm-sampling`` gives farm its own rule.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_overhead import SCRIPT

from farm import composition, logs
from farm.cli.demo import demo_farmd
from farm.clock import wait_until
from farm.queue.models import DeviceState
from farm.queue.store import Store

READY_DEADLINE_S = 120.0
JOB_DEADLINE_S = 300.0
FARMCTL = str(Path(sys.executable).with_name("farmctl"))
#: farmctl's environment: this one without ``PYTHONDONTWRITEBYTECODE`` (set in some
#: sandboxes and CI), under which every call compiles each farm module of an
#: editable install again (about 0.1 s), which a user's install never does.
USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
#: The script's measurement (``time_evaluator(number=10, repeat=3)``), asked of farm
#: too, so the two do the same work and the difference is farm's fixed cost:
#: farm's own rule warms up for at least ``warmup_min_s`` (up to 10 s on a busy
#: host) and takes 10 to 60 samples over at least ``min_measure_s``.
SCRIPT_TIMING = ["--number", "10", "--samples", "3"]
SCRIPT_SAMPLING: dict[str, Any] = {"results": {
    "min_samples": 3, "max_samples": 3, "min_measure_s": 0.0, "warmup_min_s": 0.0,
    "warmup_max_s": 0.001}}  # one warm-up sample: the first timing after an upload


def child_cpu_s() -> float:
    """CPU seconds (user + system) of this process's ended children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(argv: list[str]) -> tuple[float, str]:
    """Wall seconds of one process, and its stdout.

    Raises:
        RuntimeError: it exited non-zero.
    """
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=JOB_DEADLINE_S,
                          check=False, env=USER_ENV)
    elapsed_s = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr[-2000:]}")
    return elapsed_s, done.stdout


def enqueue_and_wait(config: Path, n: int, store: Store, timing: list[str]) -> dict[str, float]:
    """``farmctl enqueue gemm --n N --json && farmctl wait ID``, and where its seconds went.

    Returns:
        ``total`` (both processes), ``enqueue`` and ``wait`` (each process),
        ``attempt`` (claim to result, from the store) and ``after`` (the
        attempt's end to ``wait``'s exit), all wall seconds.
    """
    enqueue_s, out = timed([FARMCTL, "--config", str(config), "enqueue", "gemm", "--n", str(n),
                            *timing, "--json"])
    job_id = json.loads(out)["id"]
    wait_s, _ = timed([FARMCTL, "--config", str(config), "wait", str(job_id)])
    waited_at = datetime.now(UTC)
    [attempt] = store.attempts(job_id)
    finished_at = attempt.finished_at or waited_at
    return {"total": enqueue_s + wait_s, "enqueue": enqueue_s, "wait": wait_s,
            "attempt": (finished_at - attempt.started_at).total_seconds(),
            "after": (waited_at - finished_at).total_seconds()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--starts", type=int, default=10, help="starts timed per command")
    parser.add_argument("--before", metavar="FARMCTL",
                        help="another tree's farmctl (e.g. main's) whose starts are timed "
                             "alternately with this one's, on the same farmd")
    parser.add_argument("--farm-sampling", action="store_true",
                        help="farm's own measurement (warm-up until steady, samples until the "
                             "median is known) instead of the script's 3 samples of 10 runs")
    args = parser.parse_args()
    logs.configure(level="warning", stream=sys.stderr)
    overrides, timing = ({}, []) if args.farm_sampling else (SCRIPT_SAMPLING, SCRIPT_TIMING)
    with (
        tempfile.TemporaryDirectory(prefix="farm-bench-cli-") as tmp,
        demo_farmd(1, Path(tmp) / "data", **overrides) as farmd,
    ):
        config = Path(tmp) / "farm.toml"
        config.write_text(f'data_dir = "{farmd.settings.data_dir}"\n'
                          f'database_url = "{farmd.settings.database_url}"\n', encoding="utf-8")
        serial = farmd.fleet.serials[0]
        store = farmd.store
        if not wait_until(lambda: getattr(store.get_device(serial), "state", None)
                          is DeviceState.READY, READY_DEADLINE_S, interval_s=0.2):
            print("phone not ready", file=sys.stderr)
            return 1
        starts: dict[str, float] = {}
        trees = {"": FARMCTL, **({"before: ": args.before} if args.before else {})}
        for farmctl in trees.values():  # the first call writes the bytecode, as a user's does
            for command in (["jobs"], ["devices"]):
                timed([farmctl, "--config", str(config), *command])
        for command in (["--version"], ["jobs"], ["devices"]):
            times: dict[str, list[float]] = {label: [] for label in trees}
            cpu: dict[str, list[float]] = {label: [] for label in trees}
            for _ in range(args.starts):
                for label, farmctl in trees.items():  # alternating: the same load for both
                    before_s = child_cpu_s()
                    times[label].append(timed([farmctl, "--config", str(config), *command])[0])
                    cpu[label].append(child_cpu_s() - before_s)
            for label, taken in times.items():
                name = f"{label}farmctl {' '.join(command)}"
                starts[name] = statistics.median(taken)
                print(f"{name}: median {starts[name]:.3f} s, min {min(taken):.3f} s, "
                      f"max {max(taken):.3f} s; CPU median {statistics.median(cpu[label]):.3f} s",
                      flush=True)
        key = farmd.manager.runtime(serial).key
        host, port = farmd.tracker_addr
        farm_s, script_s = [], []
        # run 0 warms farm's compile cache and the page cache; --runs 0 times the starts only
        for run in range(args.runs + 1 if args.runs else 0):
            try:
                parts = enqueue_and_wait(config, args.n, store, timing)
                cli_s = parts["total"]
                wait_until(lambda: store.get_device(serial).state is DeviceState.READY, 30,
                           interval_s=0.05)
                hand_s, _ = timed([sys.executable, "-c", SCRIPT, host, str(port), key,
                                     str(args.n)])
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
                return 1
            label = "warm-up" if run == 0 else f"run {run}"
            print(f"{label}: farmctl enqueue && wait {cli_s:.2f} s (enqueue {parts['enqueue']:.2f}"
                  f" s, wait {parts['wait']:.2f} s; attempt claim to result "
                  f"{parts['attempt']:.2f} s, its end to wait's exit {parts['after']:.2f} s), "
                  f"script {hand_s:.2f} s", flush=True)
            if run:
                farm_s.append(cli_s)
                script_s.append(hand_s)
    print(f"\nfarmctl start, median of {args.starts}: "
          + ", ".join(f"{k} {v:.3f} s" for k, v in starts.items()) + " (goal < 0.3 s, idle host)")
    if farm_s:
        f, s = statistics.median(farm_s), statistics.median(script_s)
        print(f"GEMM {args.n} on one virtual phone, median of {args.runs}: farmctl enqueue && "
              f"wait {f:.2f} s, hand-written tracker script {s:.2f} s, ratio {f / s:.2f} "
              "(goal <= 1.1)")
    print(f"reproduce: python bench/bench_cli.py --n {args.n} --runs {args.runs} "
          f"--starts {args.starts}" + (" --farm-sampling" if args.farm_sampling else "")
          + (f" --before {args.before}" if args.before else ""))
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
