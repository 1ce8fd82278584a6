"""Finished model jobs in a test's queue, made without farmd or phones: a tune, a profile.

Imported by name (``tests/`` is on ``sys.path`` through its ``conftest.py``).
:func:`model_tune_job` is a ``tune`` job claimed by phone R1 and finished with the summary a
model tuning writes (``model_sha256``, ``target``, per-phone ``runs``); its spec
gets the ``params.model`` that ``enqueue tune --model`` stores, written to the
row directly so the helper does not depend on the tune kind's flags.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from device_states import put_state

from farm.jobs.model_store import store_model
from farm.jobs.tuning_db import RECORDS_FILE, WORKLOADS_FILE
from farm.queue import DeviceState, Outcome, Store
from farm.queue.models import Job
from farm.queue.scheduler import Assignment
from farm.tuning import tune_work_dir

NOW = datetime(2025, 1, 1, tzinfo=UTC)

#: A model as a stored spec names it (no blob behind it: nothing here compiles or reads it).
MODEL = {"sha256": "a" * 64, "name": "m.onnx", "input_shapes": {"images": [1, 3, 8, 8]}}


def model_tune_job(
    store: Store, url: str, data_dir: Path, model: Path, database_dir: Path | None,
    target: Mapping[str, Any], *, finish: bool = True,
) -> int:
    """A tune job of ``model`` whose work folder holds ``database_dir``, finished by default.

    Args:
        store: the test's queue.
        url: its database URL (the spec row is rewritten through it).
        data_dir: farm's data folder of the test's config.
        model: the ONNX file; stored as a blob as enqueue would.
        database_dir: a MetaSchedule database copied into the job's work folder.
        target: the target dict the summary names.
        finish: claim and finish it with a result; False leaves it queued.

    Returns:
        The job id.
    """
    stored = store_model(model, store, NOW)
    # Pinned to R1, which no farmd owns: a live farmd in the test neither runs it on its
    # phones nor helps it.
    job_id = store.enqueue({"kind": "tune", "params": {"gemm": {"n": 64}, "trials": 4},
                            "devices": {"serials": ["R1"]}}, NOW)
    spec = dict(store.get_job(job_id).spec)  # type: ignore[union-attr]
    params = dict(spec["params"])
    params.pop("gemm")
    params["model"] = {"sha256": stored.sha256, "name": model.name}
    spec["params"] = params
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.update(Job).where(Job.id == job_id).values(spec=spec))
    finally:
        engine.dispose()
    work_dir = tune_work_dir(data_dir, job_id)
    work_dir.mkdir(parents=True)
    if database_dir is not None:
        for name in (WORKLOADS_FILE, RECORDS_FILE):
            shutil.copyfile(database_dir / name, work_dir / name)
    if finish:
        put_state(store, "R1", DeviceState.READY, "test", NOW)
        # A lease past today's date: a live farmd's reaper, on the real clock, would
        # otherwise take the attempt back between this claim and its finish.
        lease_s = (datetime.now(UTC) - NOW).total_seconds() + 86400.0
        [claim] = store.claim([Assignment(job_id, ("R1",), lease_s)], NOW)
        summary = {"kind": "tune", "model_sha256": stored.sha256, "target": dict(target),
                   "runs": [{"serial": "R1", "untuned_samples_s": [4e-5, 4e-5],
                             "tuned_samples_s": [2e-5, 2e-5]}]}
        assert store.finish(claim.attempt.id, Outcome(summary, (2e-5, 2e-5)), NOW)
    return job_id


def profiled_job(store: Store, kernels: list[dict[str, Any]]) -> int:
    """A job finished by phones P1 and P2 whose result holds ``kernels`` as each one's
    profile (``model --profile``'s ``runs``); returns its id."""
    profile = {"kernels": kernels, "kernels_ms": 1.0, "model_ms": 1.25, "ratio": 0.8}
    job_id = store.enqueue({"kind": "gemm", "params": {"n": 64}}, NOW)
    for serial in ("P1", "P2"):
        put_state(store, serial, DeviceState.READY, "test", NOW)
    [claim] = store.claim([Assignment(job_id, ("P1", "P2"), 60.0)], NOW)
    runs = [{"serial": s, "profile": profile} for s in ("P1", "P2")]
    store.finish(claim.attempt.id, Outcome({"kind": "model", "runs": runs}, [1e-3, 1e-3], "s",
                                           ("P1", "P2")), NOW)
    return job_id


def nothing_searched_summary(model_tasks: int = 55, trials: int = 32) -> dict[str, Any]:
    """A CPU model tune's summary whose ``trials`` went to default schedules alone.

    ``--trials 32`` on a model of 55 tasks: the 32 heaviest got one trial each,
    their default schedule, so nothing was searched, no pick was checked and
    the tuned build was the untuned one, timed twice (1.10681x: noise).
    """
    from farm.tuning.outcome import decide

    decision = decide(1.10681, same_build=True, records_tuned=0, picks_checked=0,
                      picks_unchecked=0, searched=0)
    return {"kind": "tune", "model": "m.onnx", "target": {"kind": "llvm"},
            **decision.to_summary(), "picks_checked": 0, "picks_used": 0, "picks_unchecked": 0,
            "tasks": [{"name": f"t{i}", "trials": 1, "trials_measured": 1, "best_s": 1e-4,
                       "workload_index": i} for i in range(trials)],
            "model_tasks": model_tasks, "trials_requested": trials, "trials_measured": trials,
            "stopped_by": "trials",
            "runs": [{"serial": "R1", "untuned_s": 4.4e-5, "tuned_s": 4e-5, "speedup": None,
                      "untuned_samples_s": [4.4e-5] * 3, "tuned_samples_s": [4e-5] * 3,
                      "same_build": True}]}


def finished_tune(store: Store, summary: Mapping[str, Any]) -> int:
    """A tune job finished on phone R1 with ``summary`` (no model, no work folder)."""
    store.upsert_device("R1", NOW, {"abi": "arm64-v8a", "sdk": 34})
    put_state(store, "R1", DeviceState.READY, "test", NOW)
    # Pinned to R1, which no farmd owns: a live farmd in the test neither runs it on its
    # phones nor helps it.
    job_id = store.enqueue({"kind": "tune", "params": {"gemm": {"n": 64}, "trials": 4},
                            "devices": {"serials": ["R1"]}}, NOW)
    [claim] = store.claim([Assignment(job_id, ("R1",), 60.0)], NOW)
    samples = tuple(summary["runs"][0]["tuned_samples_s"])
    store.finish(claim.attempt.id, Outcome(dict(summary), samples, "s", ("R1",) * len(samples)),
                 NOW)
    return job_id


def _finished_on(store: Store, serial: str, spec: Mapping[str, Any],
                 summary: Mapping[str, Any], samples: Sequence[float]) -> int:
    """A job of ``spec`` claimed by ``serial`` and finished with ``summary`` and ``samples``."""
    if store.get_device(serial) is None:
        store.upsert_device(serial, NOW, {"abi": "arm64-v8a", "sdk": 34})
    put_state(store, serial, DeviceState.READY, "test", NOW)
    job_id = store.enqueue(dict(spec), NOW)
    [claim] = store.claim([Assignment(job_id, (serial,), 60.0)], NOW)
    store.finish(claim.attempt.id, Outcome(dict(summary), list(samples), "s",
                                           [serial] * len(samples)), NOW)
    return job_id


def model_job_on(store: Store, serial: str, samples: Sequence[float], *,
                 tuned: int | None = None) -> int:
    """A ``model`` job of :data:`MODEL` (``--tuned``) that timed ``samples`` on ``serial``."""
    return _finished_on(store, serial, {"kind": "model", "params": {**MODEL, "tuned": tuned}},
                        {"kind": "model", "tuned": tuned}, samples)


def model_tune_on(store: Store, serial: str, untuned_s: Sequence[float],
                  tuned_s: Sequence[float], *, same_build: bool | None = None,
                  **facts: Any) -> int:
    """A ``tune --model`` job of :data:`MODEL` that ran on ``serial``; returns its id.

    Its samples are ``tuned_s``; its summary's run holds both timings (and
    ``same_build`` where given), and ``facts`` are the outcome's fields
    (``records_tuned``, ``records_applied``, ``best_build``:
    :mod:`farm.tuning.outcome`), absent when not given.
    """
    run: dict[str, Any] = {"serial": serial, "untuned_samples_s": list(untuned_s),
                           "tuned_samples_s": list(tuned_s)}
    if same_build is not None:
        run["same_build"] = same_build
    summary = {"kind": "tune", "phones": [serial], **facts, "runs": [run]}
    spec = {"kind": "tune", "params": {"model": MODEL, "trials": 2, "trials_per_batch": 2}}
    return _finished_on(store, serial, spec, summary, tuned_s)
