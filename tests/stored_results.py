"""Finished benchmark jobs with chosen timings, stored the way farmd stores them (claim, finish).

Imported by name (``tests/`` is on ``sys.path`` through its ``conftest.py``), as
:mod:`device_states` is.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from device_states import put_state
from sqlalchemy import update

from farm.queue import DeviceState, Outcome, Store
from farm.queue.models import Job
from farm.queue.records import SnapshotData
from farm.queue.scheduler import Assignment
from farm.stats import compare_rounds

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def timings(seed: int, *, median_s: float = 0.01, noise: float = 0.01,
            n: int = 30) -> list[float]:
    """``n`` timings in seconds around ``median_s`` with relative noise ``noise`` (log-normal)."""
    rng = np.random.default_rng(seed)
    return [float(v) for v in median_s * rng.lognormal(0.0, noise, n)]


def finished_job(store: Store, serial: str, samples: Sequence[float], *, n: int = 64,
                 now: datetime = NOW, run_id: str | None = None,
                 repetitions: Sequence[int] = (), pinned: bool = True) -> int:
    """A gemm job that succeeded on ``serial`` with ``samples``; returns its id.

    ``run_id`` puts it in a fan-out run; ``repetitions`` (one per sample) marks re-run
    samples; ``pinned`` names the phone in the spec (``devices.serials``), as ``--each`` does.
    """
    if store.get_device(serial) is None:
        store.upsert_device(serial, now, {"abi": "arm64-v8a", "sdk": 34})
    put_state(store, serial, DeviceState.READY, "test", now)
    spec: dict[str, object] = {"kind": "gemm", "params": {"n": n}}
    if pinned:
        spec["devices"] = {"serials": [serial]}
    job_id = store.enqueue(spec, now)
    [claim] = store.claim([Assignment(job_id, (serial,), 60.0)], now)
    store.finish(claim.attempt.id,
                 Outcome({"kind": "gemm"}, list(samples), sample_serials=[serial] * len(samples),
                         sample_repetitions=list(repetitions)),
                 now)
    if run_id is not None:  # a readable run id instead of enqueue_run's random one
        with store._tx() as session:
            session.execute(update(Job).where(Job.id == job_id).values(run_id=run_id))
    return job_id


def ab_rounds(seed: int, ratio: float, rounds: int = 20, *, median_s: float = 0.01,
              noise: float = 0.01) -> list[tuple[float, float]]:
    """``rounds`` A/B rounds ``(a_s, b_s)``: B about ``ratio`` times A, drifting alike."""
    drift = timings(seed, median_s=median_s, noise=noise * 5, n=rounds)
    jitter = timings(seed + 1, median_s=1.0, noise=noise, n=rounds)
    return [(a, a * ratio * j) for a, j in zip(drift, jitter, strict=True)]


def ab_job(store: Store, rounds: Mapping[str, Sequence[tuple[float, float]]], *,
           temps_c: Mapping[str, Sequence[float]] | None = None, threshold: float = 0.05,
           now: datetime = NOW) -> int:
    """An A/B job (``gemm:n=64`` against ``gemm:n=72``) that succeeded on ``rounds``' phones.

    Stored as the ``ab`` kind stores it (:func:`farm.kinds.ab.run`): each round's
    two samples with their build and round, each phone's verdict from
    :func:`farm.stats.compare_rounds`, and per phone one reading per entry of
    ``temps_c`` (battery °C), taken before evenly spaced rounds. Returns its id.
    """
    serials = list(rounds)
    for serial in serials:
        if store.get_device(serial) is None:
            store.upsert_device(serial, now, {"abi": "arm64-v8a", "sdk": 34})
        put_state(store, serial, DeviceState.READY, "test", now)
    spec = {"kind": "ab", "params": {"a": {"gemm": {"n": 64}}, "b": {"gemm": {"n": 72}}},
            "devices": {"serials": serials, "count": len(serials)}}
    job_id = store.enqueue(spec, now)
    [claim] = store.claim([Assignment(job_id, tuple(serials), 60.0)], now)
    samples: list[float] = []
    sample_serials: list[str] = []
    arms: list[str] = []
    indices: list[int] = []
    snapshots: list[SnapshotData] = []
    per_serial: dict[str, dict[str, Any]] = {}
    for serial, taken in rounds.items():
        for index, (a_s, b_s) in enumerate(taken):
            for arm, value in (("a", a_s), ("b", b_s)):
                samples.append(value)
                sample_serials.append(serial)
                arms.append(arm)
                indices.append(index)
        temps = list((temps_c or {}).get(serial, ()))
        readings_at = [i * len(taken) // len(temps) for i in range(len(temps))]
        snapshots += [SnapshotData(serial, now, {"battery_temp_c": t}, {"thermal_status": 0},
                                   {"model": f"M-{serial}"}) for t in temps]
        a, b = [r[0] for r in taken], [r[1] for r in taken]
        c = compare_rounds(a, b, threshold=threshold)
        per_serial[serial] = {
            "verdict": c.verdict.value, "reason": c.reason, "ratio": c.ratio,
            "ci_low": c.ci_low, "ci_high": c.ci_high, "p_value": c.p_value,
            "rounds": len(taken), "decided_at": len(taken), "stopped_by": "verdict",
            "phone_s": 2.0 * len(taken), "median_a_s": statistics.median(a),
            "median_b_s": statistics.median(b), "same_library": False,
            "readings_at_rounds": readings_at,
        }
    summary = {"kind": "ab", "a": "gemm n=64 float32", "b": "gemm n=72 float32",
               "threshold": threshold, "alpha": 0.01, "confidence": 0.99, "order": "abba",
               "method": "median of per-round ratios B/A", "per_serial": per_serial,
               "samples": len(samples)}
    assert store.finish(claim.attempt.id, Outcome(
        summary, samples, "s", sample_serials, snapshots, sample_arms=arms,
        sample_rounds=indices), now)
    return job_id
