"""farmd under a steady load of every job kind and a phone's app crash every minute.

::

    python bench/bench_soak.py                                  # 2 phones, 30 min
    python bench/bench_soak.py --duration-s 300 --crash-every-s 30

Three processes, as on a real host: a private adb server, ``farm-phones serve``
(the virtual phones) and ``farmd`` with a user's defaults (its HTTP API and
dashboard served). For ``--duration-s`` the script keeps ``--backlog`` jobs
queued or running, enqueued in turn with ``farmctl enqueue``: a GEMM (N=64),
the demo CNN (``farm.demo_model``), a tiny gemm tune (8 trials) and an A/B of
the CNN against itself. Every ``--crash-every-s`` it kills one phone's RPC app
(``farm-phones fault SERIAL crash-app``, the phones in turn), so attempts die
mid-run and are retried. Every ``--sample-s`` it reads farmd's own resident
memory (VmRSS), threads and open fds.

Then it stops enqueuing and crashing, waits for every job to end, and counts:
*lost* is a job that did not succeed, or succeeded with no result; *duplicated*
is a job with results from more than one attempt, or with more result rows than
the fewest any job of its kind wrote. "Flat" compares each reading's median over
minutes 5-10 with its median over the last five minutes (the first five are
warm-up: the zygote, caches and connection pools fill).

Writes the samples as CSV and the curves as PNG (``--csv``, ``--png``; defaults
``docs/soak.csv`` and ``docs/soak.png``) and prints the figures, the load
average and, last, the command that reproduces them.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
from _farmd import footprint, heavy_mapped, start_process, stop_process, write_config

from farm import composition
from farm.clock import wait_until
from farm.demo_model import write_small_cnn
from farm.provision.standin import demo_apk
from farm.queue.db import default_url
from farm.queue.models import DeviceState, JobState
from farm.queue.store import Store
from farm.virtual.testing import adb_server

READY_DEADLINE_S = 300.0
WARM_UP_S = 300.0
ENQUEUE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Sample:
    """One reading of farmd's process ``t_s`` seconds into the soak."""

    t_s: float
    rss_mib: float
    threads: int
    fds: int
    enqueued: int
    ended: int
    crashes: int


def _kinds(model: Path) -> list[tuple[str, list[str]]]:
    """Each job kind and its ``farmctl enqueue`` arguments, in the order they are enqueued."""
    return [
        ("gemm", ["gemm", "--n", "64"]),
        ("model", ["model", "--model", str(model)]),
        ("tune", ["tune", "--n", "64", "--trials", "8", "--trials-per-batch", "4"]),
        ("ab", ["ab", str(model), str(model), "--max-phone-s", "10"]),
    ]


def _enqueue(config: Path, args: list[str]) -> int:
    """Enqueue one job with farmctl; its id. Raises RuntimeError if farmctl refuses it."""
    done = subprocess.run(["farmctl", "--config", str(config), "enqueue", *args],
                          capture_output=True, text=True, timeout=ENQUEUE_TIMEOUT_S, check=False)
    match = re.search(r"^job (\d+) queued", done.stdout, re.MULTILINE)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"farmctl enqueue {' '.join(args)}: {done.stdout}{done.stderr}")
    return int(match[1])


def _crash(phones_dir: Path, serial: str) -> None:
    subprocess.run(["farm-phones", "fault", "--data-dir", str(phones_dir), serial, "crash-app"],
                   capture_output=True, timeout=60, check=True)


def _window(samples: list[Sample], start_s: float, end_s: float,
            reading: Callable[[Sample], float]) -> float:
    values = [reading(s) for s in samples if start_s <= s.t_s < end_s]
    return statistics.median(values) if values else float("nan")


def _write_png(samples: list[Sample], crashes_s: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.t_s / 60 for s in samples]
    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    for ax, (label, reading) in zip(axes, (("farmd RSS, MiB", lambda s: s.rss_mib),
                                           ("threads", lambda s: s.threads),
                                           ("open fds", lambda s: s.fds)), strict=True):
        ax.plot(minutes, [reading(s) for s in samples], linewidth=1)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.axvline(WARM_UP_S / 60, color="grey", linestyle=":", linewidth=1)
        for t in crashes_s:
            ax.axvline(t / 60, color="red", alpha=0.15, linewidth=0.8)
        ax.grid(alpha=0.3)
    axes[0].set_title("farmd with 2 virtual phones: every job kind, an app crash (red) a minute")
    axes[-1].set_xlabel("minutes (dotted: end of the 5-minute warm-up)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> int:  # noqa: PLR0915 (one linear script: start, soak, drain, count, report)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=2)
    parser.add_argument("--duration-s", type=float, default=1800.0)
    parser.add_argument("--crash-every-s", type=float, default=60.0)
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--backlog", type=int, default=3, help="jobs kept queued or running")
    parser.add_argument("--drain-s", type=float, default=900.0,
                        help="how long the jobs left at the end may take to end")
    parser.add_argument("--csv", type=Path, default=Path("docs/soak.csv"))
    parser.add_argument("--png", type=Path, default=Path("docs/soak.png"))
    args = parser.parse_args()
    samples: list[Sample] = []
    crashes_s: list[float] = []
    jobs: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="farm-soak-") as tmp, adb_server() as server:
        root = Path(tmp)
        data = root / "farmd"
        phones_dir = root / "phones"
        config = write_config(root / "farm.toml", data_dir=data, adb_port=server.port,
                              apk=demo_apk(root / "apk"), api=True)
        kinds = _kinds(write_small_cnn(root / "cnn.onnx"))
        phones = start_process(["farm-phones", "serve", "--count", str(args.phones),
                                "--network", "usb-only", "--adb-port", str(server.port),
                                "--data-dir", str(phones_dir)], root / "phones.log")
        try:
            farmd = start_process(["farmd", "--config", str(config), "--json-logs"],
                                  root / "farmd.log")
            try:
                if not wait_until((data / "farm.db").exists, 60, interval_s=0.2):
                    print(f"farmd made no database in 60 s (see {root / 'farmd.log'})",
                          file=sys.stderr)
                    return 1
                with Store(default_url(data)) as store:
                    def ready() -> list[str]:
                        return sorted(d.serial for d in store.list_devices()
                                      if d.state is DeviceState.READY)

                    if not wait_until(lambda: len(ready()) == args.phones, READY_DEADLINE_S,
                                      interval_s=0.5):
                        print(f"only {len(ready())} phones ready in {READY_DEADLINE_S:g} s",
                              file=sys.stderr)
                        return 1
                    serials = ready()

                    def ended() -> set[int]:
                        return {i for i in jobs
                                if (job := store.get_job(i)) is not None and job.state.ended}

                    proc = psutil.Process(farmd.pid)
                    start = time.monotonic()
                    next_sample, next_crash = start, start + args.crash_every_s
                    done: set[int] = set()
                    print(f"{args.phones} phones ready; soaking {args.duration_s:g} s",
                          flush=True)
                    while (now := time.monotonic()) - start < args.duration_s:
                        done = ended()
                        if len(jobs) - len(done) < args.backlog:
                            kind, kind_args = kinds[len(jobs) % len(kinds)]
                            jobs[_enqueue(config, kind_args)] = kind
                        if now >= next_crash:
                            _crash(phones_dir, serials[len(crashes_s) % len(serials)])
                            crashes_s.append(now - start)
                            next_crash += args.crash_every_s
                        if now >= next_sample:
                            reading = footprint(proc)
                            samples.append(Sample(now - start, reading.rss_mib, reading.threads,
                                                  reading.fds, len(jobs), len(done),
                                                  len(crashes_s)))
                            next_sample += args.sample_s
                        time.sleep(0.5)
                    heavy = heavy_mapped(farmd.pid)
                    drained = wait_until(lambda: len(ended()) == len(jobs), args.drain_s,
                                         interval_s=2.0)
                    states = {i: store.get_job(i) for i in jobs}
                    results = {i: store.results(i) for i in jobs}
            finally:
                stop_process(farmd)
        finally:
            stop_process(phones)
    load = os.getloadavg()
    lost = sorted(i for i, job in states.items()
                  if job is None or job.state is not JobState.SUCCEEDED or not results[i])
    fewest = {kind: min((len(results[i]) for i, k in jobs.items() if k == kind and results[i]),
                        default=0) for kind in set(jobs.values())}
    duplicated = sorted(i for i, rows in results.items()
                        if len({r.attempt_id for r in rows}) > 1 or len(rows) > fewest[jobs[i]])
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with args.csv.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["t_s", "rss_mib", "threads", "fds", "jobs_enqueued", "jobs_ended",
                         "crashes"])
        for s in samples:
            writer.writerow([f"{s.t_s:.1f}", f"{s.rss_mib:.1f}", s.threads, s.fds, s.enqueued,
                             s.ended, s.crashes])
    _write_png(samples, crashes_s, args.png)
    end_s = samples[-1].t_s if samples else 0.0
    by_kind = ", ".join(f"{n} {k}" for k, n in sorted(Counter(jobs.values()).items()))
    print(f"\nsoak: {args.phones} phones, {end_s / 60:.1f} min, {len(crashes_s)} app crashes, "
          f"{len(jobs)} jobs ({by_kind})"
          f"{'' if drained else f'; NOT all ended within {args.drain_s:g} s'}")
    print(f"  lost: {len(lost)} {lost or ''}  duplicated: {len(duplicated)} {duplicated or ''}")
    for i in lost:
        job = states[i]
        print(f"    job {i} ({jobs[i]}): {job.state.value if job else 'gone'} "
              f"{(job.error or '') if job else ''}")
    print(f"  {'reading':<10}{'min 0-5':>10}{'min 5-10':>10}{'last 5':>10}{'change':>9}"
          f"{'range after 5':>16}")
    for label, reading in (("RSS MiB", lambda s: s.rss_mib), ("threads", lambda s: s.threads),
                           ("fds", lambda s: s.fds)):
        first = _window(samples, 0, WARM_UP_S, reading)
        early = _window(samples, WARM_UP_S, 2 * WARM_UP_S, reading)
        last = _window(samples, end_s - WARM_UP_S, end_s + 1, reading)
        after = [reading(s) for s in samples if s.t_s >= WARM_UP_S] or [float("nan")]
        print(f"  {label:<10}{first:>10.1f}{early:>10.1f}{last:>10.1f}"
              f"{100 * (last - early) / early:>8.1f}%{min(after):>8.0f}-{max(after):<7.0f}")
    print(f"  heavy packages mapped in farmd: {', '.join(heavy) or 'none'}")
    print(f"  load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"({os.cpu_count()} cores)")
    print(f"  wrote {args.csv} and {args.png}")
    print(f"reproduce: python bench/bench_soak.py --phones {args.phones} "
          f"--duration-s {args.duration_s:g} --crash-every-s {args.crash_every_s:g}")
    return 0 if drained and not lost and not duplicated else 1


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
