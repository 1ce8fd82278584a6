"""How long the queue takes to decide and to dispatch: plan(), and a store tick.

Three figures, each as p50/p99 over ``--rounds`` runs:

* ``plan_ms``: :func:`farm.queue.scheduler.plan` alone, ``--phones`` ready phones
  and ``--jobs`` queued jobs of mixed priority, age and selection (pure CPU).
  ``plan_caps_ms``: the same with capabilities in play: half the phones have
  OpenCL, two models; a quarter of the jobs are OpenCL gemms, a tenth two-phone
  tune jobs that need phones of one model (requirements read from real specs).
* ``tick_ms``: one daemon tick on a SQLite file: ``reap`` + ``head`` +
  ``plan`` + ``claim``, with the same queue; every phone gets a job.
  ``tick_whole_ms``: the same reading the whole queue (``snapshot``), as ticks
  did before :mod:`farm.queue.head`.
* ``dispatch_ms``: the queue's share of dispatch latency: a job enqueued while
  ``--jobs`` others wait and one phone is idle and ready, until ``claim`` has
  made it running (the job has the top priority so it is the one picked);
  ``dispatch_whole_ms`` reads the whole queue.

Reproduce::

    python bench/bench_scheduler.py --phones 16 --jobs 1000 --rounds 50
"""

from __future__ import annotations

import argparse
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

from _stats import percentile

from farm import composition, logs
from farm.config import JobSettings
from farm.kinds import LeaseByKind
from farm.queue import DeviceState, Outcome, Store, default_url, plan
from farm.queue.capabilities import requirements
from farm.queue.scheduler import DeviceView, QueuedJob, QueueSnapshot
from farm.queue.spec import DeviceSelection

T0 = datetime(2025, 6, 1, tzinfo=UTC)
FACTS = {
    "abi": "arm64-v8a",
    "abis": ["arm64-v8a"],
    "soc": "SM8150",
    "sdk": 30,
    "gpu": "Adreno (TM) 640",
}
#: Lease per job kind in seconds: the config's defaults (jobs.lease_s, jobs.tune_lease_s).
LEASES = LeaseByKind(JobSettings())  # farmd's leases, from the config's defaults
#: What a freed phone's attempt reports: the bench times the queue, not a job.
DONE = Outcome(summary={"median_s": 0.001}, samples=[0.001])


def percentiles_ms(samples_s: list[float]) -> tuple[float, float]:
    """p50 and p99 of durations in seconds, in milliseconds."""
    return percentile(samples_s, 50) * 1e3, percentile(samples_s, 99) * 1e3


def timed(action: Callable[..., object], *args: object) -> float:
    """Seconds one call ``action(*args)`` takes (perf_counter)."""
    start = time.perf_counter()
    action(*args)
    return time.perf_counter() - start


def synthetic_snapshot(phones: int, jobs: int, rng: random.Random) -> QueueSnapshot:
    """Ready phones and queued jobs: priorities -5..5, ages up to 2 h, some selections."""
    devices = [DeviceView(f"phone{i:02d}", DeviceState.READY, False, FACTS) for i in range(phones)]
    selections = [
        DeviceSelection(),
        DeviceSelection(abi="arm64-v8a"),
        DeviceSelection(sdk_min=29),
        DeviceSelection(count=2),
    ]
    queued = [
        QueuedJob(
            i + 1,
            "gemm",
            rng.randint(-5, 5),
            T0 - timedelta(seconds=rng.randint(0, 7200)),
            rng.choice(selections),
        )
        for i in range(jobs)
    ]
    return QueueSnapshot(queued, devices)


#: Specs of the capability mix, with their share of the queue.
CAPABILITY_MIX = [
    ({"params": {"n": 64, "target": "cpu"}}, "gemm", 0.65),
    ({"params": {"n": 64, "bn": 16, "target": "opencl"}}, "gemm", 0.25),
    ({"params": {"gemm": {"n": 64, "target": "cpu"}, "phones": 2}}, "tune", 0.10),
]


def capability_snapshot(phones: int, jobs: int, rng: random.Random) -> QueueSnapshot:
    """:func:`synthetic_snapshot` with OpenCL on half the phones, two models, and GPU/tune jobs."""
    plain = synthetic_snapshot(phones, jobs, rng)
    devices = [
        replace(d, facts={**FACTS, "has_opencl": i % 2 == 0, "model": f"model{i % 4 // 2}"})
        for i, d in enumerate(plain.devices)
    ]
    needs = [(requirements(kind, spec), kind, share) for spec, kind, share in CAPABILITY_MIX]
    pair = DeviceSelection(count=2)
    queued = []
    for job in plain.jobs:
        need, kind, _ = rng.choices(needs, weights=[share for *_, share in needs])[0]
        devices_of = pair if kind == "tune" else job.devices
        queued.append(replace(job, kind=kind, devices=devices_of, needs=need))
    return QueueSnapshot(queued, devices)


def bench_plan(snapshot: QueueSnapshot, rounds: int) -> list[float]:
    return [
        timed(partial(plan, snapshot, T0, seed=r, lease_s_by_kind=LEASES)) for r in range(rounds)
    ]


def seeded() -> random.Random:
    """The same pseudo-random draws every run: the synthetic queue is repeatable."""
    return random.Random(0)  # noqa: S311 - synthetic data, no secret


def fill_store(store: Store, phones: int, jobs: int) -> None:
    for i in range(phones):
        serial = f"phone{i:02d}"
        store.upsert_device(serial, T0, FACTS)
        store.move_device(serial, DeviceState.READY, "bench", T0,
                          expect_state=DeviceState.DISCOVERED)
    rng = seeded()
    for _ in range(jobs):
        store.enqueue({"kind": "gemm", "params": {"n": 64}, "priority": rng.randint(-5, 5)}, T0)


def free_all(store: Store, now: datetime) -> None:
    """End every running attempt: its phones are ready (and unheld) again, as after a job."""
    for device in store.list_devices():
        free(store, device.serial, now)


def free(store: Store, serial: str, now: datetime) -> None:
    """Finish the attempt a phone is busy with, if any; the phone is then ready."""
    device = store.get_device(serial)
    if device is not None and device.attempt_id is not None:
        store.finish(device.attempt_id, DONE, now)


def queue_of(store: Store, now: datetime, seed: int, whole: bool) -> QueueSnapshot:
    """What a tick plans from: the head of the queue (farmd), or all of it (``whole``)."""
    return store.snapshot() if whole else store.head(now, seed=seed, kinds=LEASES.keys())


def tick(store: Store, now: datetime, seed: int, whole: bool) -> None:
    """One daemon tick: reap, head (or snapshot), plan, claim."""
    store.reap(now)
    queue = queue_of(store, now, seed, whole)
    store.claim(plan(queue, now, seed=seed, lease_s_by_kind=LEASES), now)


def dispatch(store: Store, now: datetime, seed: int, whole: bool) -> None:
    """Enqueue a top-priority job and start it on the idle phone."""
    job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}, "priority": 1000}, now)
    queue = queue_of(store, now, seed, whole)
    claims = store.claim(plan(queue, now, seed=seed, lease_s_by_kind=LEASES), now)
    if [c.job.id for c in claims] != [job_id]:
        raise AssertionError(f"expected job {job_id} to start, got {claims}")


def bench_tick(url: str, phones: int, jobs: int, rounds: int, whole: bool) -> list[float]:
    samples = []
    with Store(url) as store:
        fill_store(store, phones, jobs)
        now = T0
        for r in range(rounds):
            now += timedelta(seconds=1)
            topup = phones  # keep the queue at --jobs
            for _ in range(topup):
                store.enqueue({"kind": "gemm", "params": {"n": 64}}, now)

            samples.append(timed(tick, store, now, r, whole))
            free_all(store, now)
    return samples


def bench_dispatch(url: str, phones: int, jobs: int, rounds: int, whole: bool) -> list[float]:
    samples = []
    with Store(url) as store:
        fill_store(store, phones, jobs)
        # Every phone but one is busy; the idle one waits for the new job.
        store.claim(plan(store.snapshot(), T0, lease_s_by_kind=LEASES), T0)
        idle = "phone00"
        now = T0
        for r in range(rounds):
            now += timedelta(seconds=1)
            free(store, idle, now)

            samples.append(timed(dispatch, store, now, r, whole))
    return samples


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print one line each; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phones", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=1000, help="queued jobs")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args(argv)
    logs.configure(level="warning")  # one line per transition would swamp the figures
    print("command:", shlex.join([sys.executable, *sys.argv]))
    print(f"phones={args.phones} queued_jobs={args.jobs} rounds={args.rounds}")

    snapshot = synthetic_snapshot(args.phones, args.jobs, seeded())
    p50, p99 = percentiles_ms(bench_plan(snapshot, args.rounds))
    print(f"plan_ms      p50={p50:8.2f} p99={p99:8.2f}  (pure plan())")
    snapshot = capability_snapshot(args.phones, args.jobs, seeded())
    p50, p99 = percentiles_ms(bench_plan(snapshot, args.rounds))
    print(f"plan_caps_ms p50={p50:8.2f} p99={p99:8.2f}  (pure plan(), OpenCL and tune jobs)")
    with tempfile.TemporaryDirectory(prefix="bench_scheduler_") as tmp:
        for name, whole, read in [("", False, "head"), ("_whole", True, "snapshot")]:
            url = default_url(Path(tmp) / f"tick{name}")
            p50, p99 = percentiles_ms(bench_tick(url, args.phones, args.jobs, args.rounds, whole))
            label = f"tick{name}_ms"
            print(f"{label:<18} p50={p50:8.2f} p99={p99:8.2f}  (reap+{read}+plan+claim, SQLite)")
        for name, whole, read in [("", False, "head"), ("_whole", True, "snapshot")]:
            url = default_url(Path(tmp) / f"dispatch{name}")
            samples = bench_dispatch(url, args.phones, args.jobs, args.rounds, whole)
            p50, p99 = percentiles_ms(samples)
            label = f"dispatch{name}_ms"
            print(f"{label:<18} p50={p50:8.2f} p99={p99:8.2f}"
                  f"  (enqueue -> running on an idle phone, {read}, SQLite)")
    return 0


if __name__ == "__main__":
    composition.install()  # the job kinds, controllers and readings (farm.composition)
    sys.exit(main())
