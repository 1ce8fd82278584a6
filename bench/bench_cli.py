"""farmctl's own cost: start time of a command, and ``enqueue && wait`` against a hand script.

::

    python bench/bench_cli.py                  # starts: median of 10; GEMM 512, 3 runs each way
    python bench/bench_cli.py --starts 20 --runs 5

One virtual phone, provisioned by farmd (in-process, :func:`farm.cli.demo.demo_farmd`).

* **start**: wall time of ``farmctl --version``, ``farmctl jobs`` and ``farmctl
  devices`` as a user runs them (the console script, a new process each time,
  on farmd's database), median of ``--starts`` (goal < 0.3 s on an idle host).
* **enqueue && wait**: ``farmctl enqueue gemm --n N`` then ``farmctl wait ID``,
  two processes as a shell would run them, from the first one's start to the
  second one's exit; against the same GEMM by a hand-written tracker script
  (bench_overhead.py's :data:`SCRIPT`: import TVM, build, request the phone's
  key, upload, check, ``time_evaluator``), alternating, after one warm-up run
  of each (goal: farmctl at most 1.1x the script).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_overhead import SCRIPT

from farm import logs
from farm.cli.demo import demo_farmd
from farm.clock import wait_until
from farm.queue.models import DeviceState

READY_DEADLINE_S = 120.0
JOB_DEADLINE_S = 300.0
FARMCTL = str(Path(sys.executable).with_name("farmctl"))


def timed(argv: list[str]) -> tuple[float, str]:
    """Wall seconds of one process, and its stdout.

    Raises:
        RuntimeError: it exited non-zero.
    """
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=JOB_DEADLINE_S,
                          check=False)
    elapsed_s = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr[-2000:]}")
    return elapsed_s, done.stdout


def enqueue_and_wait(config: Path, n: int) -> float:
    """``farmctl enqueue gemm --n N --json && farmctl wait ID``: wall seconds of both."""
    enqueue_s, out = timed([FARMCTL, "--config", str(config), "enqueue", "gemm", "--n", str(n),
                            "--json"])
    job_id = json.loads(out)["id"]
    wait_s, _ = timed([FARMCTL, "--config", str(config), "wait", str(job_id)])
    return enqueue_s + wait_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--starts", type=int, default=10, help="starts timed per command")
    args = parser.parse_args()
    logs.configure(level="warning", stream=sys.stderr)
    with (
        tempfile.TemporaryDirectory(prefix="farm-bench-cli-") as tmp,
        demo_farmd(1, Path(tmp) / "data") as farmd,
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
        for command in (["--version"], ["jobs"], ["devices"]):
            times = [timed([FARMCTL, "--config", str(config), *command])[0]
                     for _ in range(args.starts)]
            starts[" ".join(command)] = statistics.median(times)
            print(f"farmctl {' '.join(command)}: median {starts[' '.join(command)]:.3f} s, "
                  f"min {min(times):.3f} s, max {max(times):.3f} s", flush=True)
        key = farmd.manager.runtime(serial).key
        host, port = farmd.tracker_addr
        farm_s, script_s = [], []
        for run in range(args.runs + 1):  # run 0 warms farm's compile cache and the page cache
            try:
                cli_s = enqueue_and_wait(config, args.n)
                wait_until(lambda: store.get_device(serial).state is DeviceState.READY, 30,
                           interval_s=0.05)
                hand_s, _ = timed([sys.executable, "-c", SCRIPT, host, str(port), key,
                                     str(args.n)])
            except RuntimeError as exc:
                print(exc, file=sys.stderr)
                return 1
            label = "warm-up" if run == 0 else f"run {run}"
            print(f"{label}: farmctl enqueue && wait {cli_s:.2f} s, script {hand_s:.2f} s",
                  flush=True)
            if run:
                farm_s.append(cli_s)
                script_s.append(hand_s)
    f, s = statistics.median(farm_s), statistics.median(script_s)
    print(f"\nfarmctl start, median of {args.starts}: "
          + ", ".join(f"{k} {v:.3f} s" for k, v in starts.items()) + " (goal < 0.3 s, idle host)")
    print(f"GEMM {args.n} on one virtual phone, median of {args.runs}: farmctl enqueue && wait "
          f"{f:.2f} s, hand-written tracker script {s:.2f} s, ratio {f / s:.2f} (goal <= 1.1)")
    print(f"reproduce: python bench/bench_cli.py --n {args.n} --runs {args.runs} "
          f"--starts {args.starts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
