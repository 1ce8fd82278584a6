"""A/B jobs' verdict rates at the defaults on two virtual phones beside farmd, and their phone time.

Starts farmd with two virtual phones as ``farmd --virtual-phones 2`` does (their
RPC processes not made quiet: they and farmd share the host's cores) and runs,
as ``farmctl enqueue ab A B --each`` would, with every ``[ab]`` and
``[results]`` default:

- ``--tries`` A/B jobs per phone of GEMM n=256 against n=260 (4.8% more work;
  260's default block is 4, not 32, so it runs far slower): how often each
  phone calls B slower;
- ``--tries-ab5`` of n=256 against n=256 with ``bn=16`` (the same work,
  another block): a change near 10% on these phones;
- ``--tries-aa`` of n=256 against n=256 (one build): how often B is called
  slower or faster (false alarms);
- ``--tries-throttle`` A/A jobs with the first phone throttled to 0.9 while
  the job runs (the knob turned once its first readings were taken): slower
  or faster is a false alarm.

Each line gives the verdicts, the median ratio and the phone time per job
(median and largest), and rounds.

Reproduce::

    python bench/bench_ab.py --tries 10 --tries-aa 20 --tries-throttle 10
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from farm import composition
from farm.clock import wait_until
from farm.config import Settings
from farm.daemon import Farmd
from farm.netaddr import free_port
from farm.queue.models import DeviceState, JobState
from farm.queue.store import Store
from farm.virtual.testing import adb_server

READY_DEADLINE_S = 180.0
JOB_DEADLINE_S = 900.0


def _settings(data_dir: Path, adb_port: int) -> Settings:
    return Settings.model_validate({
        "data_dir": str(data_dir), "log_level": "warning", "adb": {"port": adb_port},
        "tracker": {"port": free_port(), "network": "usb-only"},
        "metrics": {"enabled": False}, "api": {"enabled": False},
        "virtual": {"network": "usb-only"},
    })


def _each(store: Store, serials: list[str], a: dict[str, Any], b: dict[str, Any],
          during: Any = None) -> list[dict[str, Any]]:
    """One A/B job per phone (as --each), waited for; each phone's figures."""
    specs = [{"kind": "ab", "params": {"a": a, "b": b}, "devices": {"serials": [s]}}
             for s in serials]
    _, job_ids = store.enqueue_run(specs, datetime.now(UTC))
    if during is not None:
        during(job_ids)
    ended = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
    wait_until(lambda: all(store.get_job(j).state in ended for j in job_ids), JOB_DEADLINE_S,
               f"jobs {job_ids}")
    figures = []
    for job_id in job_ids:
        view = store.get_job(job_id)
        if view.state is not JobState.SUCCEEDED:
            sys.exit(f"job {job_id} {view.state.value}: {view.error}")
        figures += list(store.results(job_id)[0].summary["per_serial"].values())
    return figures


def _throttled_aa(farmd: Farmd, serial: str, tries: int,
                  after_s: float) -> tuple[list[dict[str, Any]], list[bool]]:
    """A/A jobs on ``serial``, throttled to 0.9 ``after_s`` into each; whether it landed in time."""
    store = farmd.store
    landed: list[bool] = []
    figures: list[dict[str, Any]] = []
    threads: list[threading.Thread] = []

    def throttle_midway(job_ids: list[int]) -> None:
        def turn() -> None:  # its attempt running, the build cached: into its rounds
            wait_until(lambda: store.get_job(job_ids[0]).state is not JobState.QUEUED,
                       JOB_DEADLINE_S, "the attempt")
            time.sleep(after_s)
            at = datetime.now(UTC)
            farmd.fleet.throttle(serial, 0.9)
            wait_until(lambda: store.get_job(job_ids[0]).state.ended, JOB_DEADLINE_S)
            finished = store.get_job(job_ids[0]).finished_at
            landed.append(finished is not None and finished > at)
        threads.append(threading.Thread(target=turn, daemon=True))
        threads[-1].start()

    gemm256 = {"gemm": {"n": 256}}
    for _ in range(tries):
        try:
            figures += _each(store, [serial], gemm256, gemm256, during=throttle_midway)
            threads[-1].join(JOB_DEADLINE_S)
        finally:
            farmd.fleet.throttle(serial, 1.0)
    return figures, landed


def _line(name: str, figures: list[dict[str, Any]]) -> str:
    verdicts = Counter(f["verdict"] for f in figures)
    ratios = [f["ratio"] for f in figures]
    phone = [f["phone_s"] for f in figures]
    rounds = [f["rounds"] for f in figures]
    return (f"{name:<34} {len(figures):>3} jobs  "
            + ", ".join(f"{v} {c}" for v, c in verdicts.most_common())
            + f"  | ratio median {statistics.median(ratios):.3f}"
            + f"  | phone s median {statistics.median(phone):.1f} max {max(phone):.1f}"
            + f"  | rounds median {statistics.median(rounds):.0f} max {max(rounds)}")


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print its lines; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=10, help="256 vs 260 jobs per phone")
    parser.add_argument("--tries-ab5", type=int, default=5, help="256 vs 256 bn=16 per phone")
    parser.add_argument("--tries-aa", type=int, default=20, help="A/A jobs per phone")
    parser.add_argument("--tries-throttle", type=int, default=10,
                        help="A/A jobs with the first phone throttled to 0.9 midway")
    parser.add_argument("--throttle-after-s", type=float, default=2.5,
                        help="seconds after the A/A attempt starts that the throttle is turned")
    args = parser.parse_args(argv)
    from farm import logs

    logs.configure(json=True, level="warning", stream=sys.stderr)
    gemm256, gemm260 = {"gemm": {"n": 256}}, {"gemm": {"n": 260}}
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp, adb_server() as server:
        farmd = Farmd(_settings(Path(tmp), server.port), virtual_phones=2)
        try:
            farmd.start()
            serials = list(farmd.fleet.serials)
            store = farmd.store
            wait_until(lambda: all(store.get_device(s).state is DeviceState.READY
                                   for s in serials), READY_DEADLINE_S, "phones ready")
            started = time.monotonic()
            rows: dict[str, list[dict[str, Any]]] = {
                "256 vs 260 (slower expected)": [], "256 vs 256 bn=16 (~10% slower)": [],
                "256 vs 256 (A/A)": [], "A/A, phone 1 throttled 0.9 midway": []}
            for _ in range(args.tries):
                rows["256 vs 260 (slower expected)"] += _each(store, serials, gemm256, gemm260)
            for _ in range(args.tries_ab5):
                rows["256 vs 256 bn=16 (~10% slower)"] += _each(
                    store, serials, {"gemm": {"n": 256, "bn": 32}}, {"gemm": {"n": 256, "bn": 16}})
            for _ in range(args.tries_aa):
                rows["256 vs 256 (A/A)"] += _each(store, serials, gemm256, gemm256)

            figures, landed = _throttled_aa(farmd, serials[0], args.tries_throttle,
                                            args.throttle_after_s)
            rows["A/A, phone 1 throttled 0.9 midway"] = figures
            print(f"two virtual phones beside farmd, [ab] and [results] defaults; "
                  f"{time.monotonic() - started:.0f} s")
            for name, figures in rows.items():
                if figures:
                    print(_line(name, figures))
            if landed:
                print(f"  the throttle landed before the job ended in {sum(landed)} of "
                      f"{len(landed)} A/A jobs")
        finally:
            farmd.stop()
    print("reproduce: python bench/bench_ab.py " + shlex.join(sys.argv[1:] if argv is None
                                                               else argv))
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
