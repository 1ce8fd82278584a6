"""Finished benchmark jobs with chosen timings, stored the way farmd stores them (claim, finish).

Imported by name (``tests/`` is on ``sys.path`` through its ``conftest.py``), as
:mod:`device_states` is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
from device_states import put_state
from sqlalchemy import update

from farm.queue import DeviceState, Outcome, Store
from farm.queue.models import Job
from farm.queue.scheduler import Assignment

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
