"""Flat results: one row per raw sample, with its phone and the phone's state at that run.

A stored result keeps its raw samples (``samples``: value, unit, serial,
repetition) apart from the phone states thermal gating took before each
measured run (``device_snapshots``). :func:`rows_of` joins them by the one
pairing rule (:mod:`farm.results.pairing`), so every sample says which phone
measured it (serial, model, SoC, ABI) and how it was just before (the readings
the kinds declare ``with_results``: a phone's battery temperature and Android
thermal status); a figure without that context cannot be set beside the next
one. Samples of different phones are never pooled here: callers group by
``serial``.

A row's readings are one mapping in Python; in the flat CSV/JSON and on the
API's wire each is a column of its own, named as declared (:func:`sample_fields`,
:meth:`~farm.results.flat.FlatReadings.flat`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from farm.kinds import KINDS
from farm.queue.records import JobView, ResultView, SnapshotData
from farm.queue.store import Store
from farm.results.flat import FlatReadings
from farm.results.pairing import MeasuredSnapshots, readings_at

__all__ = ["SampleRow", "latest_repetition", "rows_of", "sample_fields", "sample_rows"]


@dataclass(frozen=True)
class SampleRow(FlatReadings):
    """One raw sample of one phone.

    Attributes:
        job_id: the job that measured it.
        run_id: the fan-out group of ``enqueue --each`` (``r-`` + 12 hex), or None.
        serial: the phone's adb serial; None where the kind did not record it.
        model: the phone's ``ro.product.model`` (from its facts).
        soc: the phone's SoC (facts ``soc``).
        abi: the phone's primary ABI, e.g. ``arm64-v8a``.
        workload: what ran, e.g. ``gemm n=256 float32`` (the kind's label).
        repetition: 0 for the first measurement, 1 for a noisy phone's re-run.
        index: the sample's position in its result (0-based, over all phones).
        value: the raw value, in ``unit`` (seconds for timings: smaller is faster).
        unit: the value's unit.
        finished_at: when the job ended (aware UTC).
        arm: an A/B job's build (``"a"`` or ``"b"``), else None.
        round: an A/B job's round (from 0, per phone), else None.
        emulated: the device runs its code under emulation (a board under QEMU,
            facts ``emulated``): the value is the emulator's time, not the CPU's.
        readings: the device's readings just before the sample's run, by
            name, each reading declared ``with_results``
            (:func:`farm.health.readings.result_readings`) in its unit; None
            where not read.
    """

    job_id: int
    run_id: str | None
    serial: str | None
    model: str | None
    soc: str | None
    abi: str | None
    workload: str
    repetition: int
    index: int
    value: float
    unit: str
    finished_at: datetime | None
    arm: str | None = None
    round: int | None = None
    emulated: bool = False
    readings: Mapping[str, float | None] = field(default_factory=dict)

    READINGS_AFTER: ClassVar[str] = "unit"


def sample_fields() -> list[str]:
    """Column order of the flat CSV/JSON (``farmctl results --format csv|json``).

    The sample's fields with, after ``unit``, one column per reading declared
    ``with_results`` (:meth:`~farm.results.flat.FlatReadings.flat_fields`).
    """
    return SampleRow.flat_fields()


def _workload(spec: Mapping[str, Any]) -> str:
    name = str(spec.get("kind", "?"))
    kind = KINDS.get(name)
    return kind.workload(spec) if kind is not None else name


def _abi(facts: Mapping[str, Any]) -> str | None:
    abi = facts.get("abi") or next(iter(facts.get("abis") or ()), None)
    return None if abi is None else str(abi)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def rows_of(
    job: JobView,
    result: ResultView,
    snapshots: Sequence[SnapshotData],
    device_facts: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[SampleRow]:
    """One row per raw sample of ``result`` (pure: plain data in, rows out).

    Args:
        job: the result's job.
        result: the job's result with its samples, serials and repetitions.
        snapshots: the job's phone snapshots, oldest first (``Store.snapshots``).
        device_facts: each phone's current facts, by serial: used where a
            snapshot did not keep them.

    Returns:
        The rows in sample order.
    """
    known = device_facts or {}
    measured = MeasuredSnapshots(result, snapshots)
    serials = result.serials or (None,) * len(result.samples)
    repetitions = result.repetitions or (0,) * len(result.samples)
    arms = result.arms or (None,) * len(result.samples)
    rounds = result.rounds or (None,) * len(result.samples)
    per_serial: dict[str | None, int] = defaultdict(int)
    for serial in serials:
        per_serial[serial] += 1
    seen: dict[str | None, int] = defaultdict(int)
    workload = _workload(job.spec)
    rows = []
    for index, (value, serial, repetition, arm, round_) in enumerate(
        zip(result.samples, serials, repetitions, arms, rounds, strict=True)
    ):
        snap = measured.of_sample(serial, seen[serial], per_serial[serial], round_)
        seen[serial] += 1
        facts = {**known.get(serial or "", {}), **(snap.facts if snap else {})}
        rows.append(SampleRow(
            job_id=job.id, run_id=job.run_id, serial=serial, model=_text(facts.get("model")),
            soc=_text(facts.get("soc")), abi=_abi(facts), workload=workload,
            repetition=repetition, index=index, value=value, unit=result.unit,
            finished_at=job.finished_at, arm=arm, round=round_,
            emulated=bool(facts.get("emulated")), readings=readings_at(snap),
        ))
    return rows


def sample_rows(
    store: Store, *, job_ids: Iterable[int] | None = None, run_id: str | None = None,
    limit: int = 1000,
) -> list[SampleRow]:
    """The flat rows of the given jobs, of one run, or of the newest ``limit`` results.

    Jobs without a result (queued, failed) have no rows. Rows come by job id,
    then sample order.

    Raises:
        StoreError: the database refused the reads.
    """
    if job_ids is not None or run_id is not None:
        ids = set(job_ids or ())
        if run_id is not None:
            ids |= {j.id for j in store.list_jobs(limit=1_000_000, run_id=run_id)}
        results = [r for job_id in sorted(ids) for r in store.results(job_id)]
    else:
        results = sorted(store.results(limit=limit), key=lambda r: r.job_id)
    facts = {d.serial: d.facts for d in store.list_devices()}
    rows: list[SampleRow] = []
    for result in results:
        job = store.get_job(result.job_id)
        if job is not None:
            rows += rows_of(job, result, store.snapshots(job.id), facts)
    return rows


def latest_repetition(rows: Iterable[SampleRow]) -> list[SampleRow]:
    """The rows of each job and phone's last measurement: a noisy phone's re-run replaces it.

    This is the set a phone's figure (spread, comparison) is computed from.
    """
    rows = list(rows)
    last: dict[tuple[int, str | None], int] = defaultdict(int)
    for row in rows:
        key = (row.job_id, row.serial)
        last[key] = max(last[key], row.repetition)
    return [r for r in rows if r.repetition == last[(r.job_id, r.serial)]]
