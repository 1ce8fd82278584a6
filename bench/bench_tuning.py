"""GEMM GFLOPS per virtual phone and the tuned over untuned speedup, through farmd.

Starts a private adb server and an in-process farmd with ``--phones`` virtual
phones (as ``farmctl demo`` does: its own tracker, the stand-in APK installed,
usb-only tunnels), then through farm's queue:

1. one GEMM job per phone (``--n``, CPU, numpy-checked), printing GFLOPS per phone;
2. one MetaSchedule tuning job of the same GEMM over ``--tune-phones`` phones
   with ``--trials`` trials, printing the speedup of the best schedule over the
   untuned kernel, both timed on a phone.

Everything runs on this host, so the virtual phones share its cores: the
numbers compare schedules, not phones.

Reproduce::

    python bench/bench_tuning.py --phones 2 --n 128 --trials 16
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
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

FINISHED = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
READY_DEADLINE_S = 180.0


def _settings(data_dir: Path, adb_port: int) -> Settings:
    return Settings.model_validate({
        "data_dir": str(data_dir),
        "log_level": "warning",
        "adb": {"port": adb_port},
        "tracker": {"port": free_port(), "network": "usb-only"},
        "metrics": {"enabled": False},
        "api": {"enabled": False},
        "virtual": {"network": "usb-only"},
    })


def _run(store: Store, spec: dict[str, Any], deadline_s: float) -> Any:
    """Enqueue ``spec``, wait for it, return its result (exit on failure)."""
    job_id = store.enqueue(spec, datetime.now(UTC))
    wait_until(lambda: store.get_job(job_id).state in FINISHED, deadline_s, f"job {job_id}")
    view = store.get_job(job_id)
    if view.state is not JobState.SUCCEEDED:
        sys.exit(f"job {job_id} {view.state.value}: {view.error}")
    return store.results(job_id)[0]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=2, help="virtual phones")
    parser.add_argument("--n", type=int, default=128, help="GEMM size N")
    parser.add_argument("--trials", type=int, default=16, help="tuning trials")
    parser.add_argument("--tune-phones", type=int, default=2, help="phones measuring candidates")
    parser.add_argument("--deadline-s", type=float, default=1800.0, help="per job")
    args = parser.parse_args(argv)
    if not 1 <= args.tune_phones <= args.phones:
        parser.error("--tune-phones must be between 1 and --phones")

    from farm import logs

    logs.configure(json=True, level="warning", stream=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="bench-tuning-") as tmp, adb_server() as server:
        farmd = Farmd(_settings(Path(tmp), server.port), virtual_phones=args.phones)
        try:
            started_s = time.monotonic()
            farmd.start()
            serials = list(farmd.fleet.serials)
            store = farmd.store
            wait_until(lambda: all(store.get_device(s).state is DeviceState.READY for s in serials),
                       READY_DEADLINE_S, "phones ready")
            print(f"{args.phones} virtual phones ready in {time.monotonic() - started_s:.1f} s")
            print(f"GEMM N={args.n} float32, CPU, number=10 repeat=5")
            for serial in serials:
                result = _run(store, {"kind": "gemm", "params": {"n": args.n, "repeat": 5},
                                      "devices": {"serials": [serial]}}, args.deadline_s)
                model = store.get_device(serial).facts.get("model", "?")
                print(
                    f"  {serial:<18} {model:<22} {result.summary['gflops']:8.2f} GFLOPS  "
                    f"({len(result.samples)} samples, mean {result.summary['mean_s'] * 1e3:.3f} ms)"
                )
            tune_started_s = time.monotonic()
            tuned = _run(store, {
                "kind": "tune",
                "params": {"gemm": {"n": args.n, "repeat": 5}, "trials": args.trials,
                           "trials_per_batch": min(8, args.trials), "phones": args.tune_phones},
            }, args.deadline_s).summary
            untuned_ms = 1e3 * sum(tuned["untuned_samples_s"]) / len(tuned["untuned_samples_s"])
            tuned_ms = 1e3 * sum(tuned["tuned_samples_s"]) / len(tuned["tuned_samples_s"])
            print(f"tuning over {args.tune_phones} phones: {tuned['trials_measured']} trials "
                  f"measured ({tuned['trials_failed']} failed) in "
                  f"{time.monotonic() - tune_started_s:.0f} s, {tuned['rounds']} round(s)")
            print(f"  all phones' samples: untuned {untuned_ms:.3f} ms, tuned {tuned_ms:.3f} ms")
            for serial, figures in tuned["per_serial"].items():  # never averaged over phones
                print(f"  {serial:<18} tuned {figures['tuned_gflops']:.2f} GFLOPS: "
                      f"speedup {figures['speedup']:.2f}x")
        finally:
            farmd.stop()
    print("reproduce: python bench/bench_tuning.py " + shlex.join(sys.argv[1:] if argv is None
                                                                   else argv))
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
