"""The two sides of ``farmctl compare``: what a job id or run id timed, per phone.

A side is a job id (``12``), the run id of an ``enqueue --each`` fan-out
(``r-1a2b3c4d5e6f``, one job per phone) or a model tune's untuned timings
(``12:untuned``). :func:`load_side` reads it from the store into a
:class:`Side`: each phone's raw timings, the job that measured them, the build
(:mod:`farm.results.builds`), thermal changes and emulation;
:mod:`farm.results.compare` compares two of them and the regression watch
(:mod:`farm.results.watch`) one against its baseline.

Which samples (read with :func:`farm.results.rows.sample_rows`): of each job
and phone only the last repetition (:func:`farm.results.rows.latest_repetition`).
A noisy result is re-run once (``repetition`` 1) because its first samples
were not to be trusted, so the re-run's samples replace them rather than join
them. Samples of one phone in several jobs of one side (a run that ran twice
on it) are pooled: they are one phone measuring one workload.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from farm.errors import UserFault
from farm.kinds import kind_of
from farm.queue.models import DB_INT_MAX, JobState
from farm.queue.records import JobView
from farm.queue.store import Store
from farm.results.builds import Build, build_in, build_of, split_ref, untuned_timings
from farm.results.rows import SampleRow, latest_repetition, sample_rows
from farm.results.spreads import THERMAL_STATUS, thermal_change

__all__ = ["Side", "by_phone", "emulation_refusal", "load_side", "side_of"]

_RUN_ID = re.compile(r"^r-[0-9A-Za-z]{1,30}$")
_TIMING_UNIT = "s"


@dataclass(frozen=True)
class Side:
    """One side of a comparison: its jobs and each phone's timings.

    Attributes:
        ref: what the user named, e.g. ``"job 12"`` or ``"run r-1a2b"``.
        workload: the jobs' workload label (``Kind.workload``), e.g. ``"gemm n=256 float32"``.
        timings: serial -> seconds per run, the phone's last repetition.
        jobs: serial -> the id of the job that measured it (the newest if several).
        build: which build of which model it timed (untuned, tuned by job N); None
            for a workload that is no model.
        thermal: serial -> ``(lowest, highest)`` thermal status before its
            runs, for phones whose status changed while they were measured.
        emulated: the serials whose timings were taken under emulation (a
            board under QEMU: :attr:`~farm.results.rows.SampleRow.emulated`).
    """

    ref: str
    workload: str
    timings: Mapping[str, tuple[float, ...]]
    jobs: Mapping[str, int] = field(default_factory=dict)
    build: Build | None = None
    thermal: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    emulated: frozenset[str] = frozenset()

    @property
    def shown(self) -> str:
        """``job 9 (tuned by job 7)``; the ref alone when it times no model."""
        return self.ref if self.build is None else f"{self.ref} ({self.build.label})"

    def comparable(self, other: Side) -> bool:
        """Same workload, or two builds of one model on the same inputs and target."""
        if self.workload == other.workload:
            return True
        return (self.build is not None and other.build is not None
                and self.build.identity == other.build.identity)


def by_phone(rows: Iterable[SampleRow]) -> dict[str, dict[int, list[float]]]:
    """serial -> job id -> that job's values on that phone, in order, its last repetition only.

    Rows without a phone (stored before samples named theirs) are left out.

    Raises:
        UserFault: a sample is not a timing in seconds (only timings are compared).
    """
    phones: dict[str, dict[int, list[float]]] = {}
    for row in latest_repetition(rows):
        if row.unit != _TIMING_UNIT:
            raise UserFault(f"job {row.job_id} has samples in {row.unit!r}: "
                            "only timings in seconds can be compared")
        if row.serial is not None:
            phones.setdefault(row.serial, {}).setdefault(row.job_id, []).append(row.value)
    return phones


def _jobs_of(store: Store, ref: str) -> tuple[str, list[JobView]]:
    """The jobs ``ref`` names, checked finished; raises UserFault otherwise."""
    if _RUN_ID.match(ref):
        jobs = sorted(store.list_jobs(limit=DB_INT_MAX, run_id=ref), key=lambda j: j.id)
        if not jobs:
            raise UserFault(f"no run {ref}")
        unfinished = [j.id for j in jobs if not j.state.ended]
        if unfinished:
            raise UserFault(f"run {ref} has unfinished jobs ({', '.join(map(str, unfinished))}): "
                            "wait for them first")
        done = [j for j in jobs if j.state is JobState.SUCCEEDED]
        if not done:
            raise UserFault(f"run {ref} has no succeeded job to compare")
        return f"run {ref}", done
    if not ref.isdigit() or int(ref) < 1:
        raise UserFault(f"{ref!r} is neither a job id nor a run id (r-...)")
    job = store.get_job(int(ref)) if int(ref) <= DB_INT_MAX else None
    if job is None:
        raise UserFault(f"no job {ref}")
    if job.state is not JobState.SUCCEEDED:
        raise UserFault(f"job {ref} is {job.state.value}: only a succeeded job can be compared")
    return f"job {ref}", [job]


def side_of(store: Store, ref: str, jobs: list[JobView]) -> Side:
    """The :class:`Side` of finished ``jobs`` (one workload), named ``ref``.

    Raises:
        UserFault: the jobs measure different workloads, or a sample is not in seconds.
    """
    if ab_jobs := [j.id for j in jobs if j.kind == "ab"]:
        raise UserFault(f"{ref} is an A/B job (job {ab_jobs[0]}): it compared its two builds "
                        f"itself; its verdict is in `farmctl job {ab_jobs[0]}`")
    workloads = sorted({kind_of(j.kind).workload(j.spec) for j in jobs})
    if len(workloads) != 1:
        raise UserFault(f"{ref} mixes workloads ({'; '.join(workloads)})")
    timings: dict[str, tuple[float, ...]] = {}
    job_of: dict[str, int] = {}
    rows = sample_rows(store, job_ids=[j.id for j in jobs])
    for serial, by_job in sorted(by_phone(rows).items()):
        timings[serial] = tuple(v for job_id in sorted(by_job) for v in by_job[job_id])
        job_of[serial] = max(by_job)
    statuses: dict[str, list[int]] = {}
    for row in latest_repetition(rows):
        status = row.readings.get(THERMAL_STATUS)
        if row.serial is not None and status is not None:
            statuses.setdefault(row.serial, []).append(int(status))
    thermal = {serial: change for serial, seen in statuses.items()
               if (change := thermal_change(seen)) is not None}
    builds = {build_of(j) for j in jobs}  # one build's tuning is read once, not per job
    build = build_in(store, jobs[0]) if len(builds) == 1 else None
    emulated = frozenset(row.serial for row in rows if row.emulated and row.serial is not None)
    return Side(ref, workloads[0], timings, job_of, build, thermal, emulated)


def emulation_refusal(a: Side, b: Side) -> str | None:
    """Why ``a`` and ``b`` cannot be compared for emulation, or None when they can.

    Refused: a phone emulated on one side only, or (no phone in common) one
    side timed on emulated devices only and the other on real ones.
    """
    common = set(a.timings) & set(b.timings)
    for serial in sorted(common):
        if (serial in a.emulated) != (serial in b.emulated):
            emulated, real = (a, b) if serial in a.emulated else (b, a)
            return (f"{serial} ran emulated in {emulated.ref} but not in {real.ref}; "
                    "emulated timings compare only with emulated ones")
    if common:
        return None
    for emulated, real in ((a, b), (b, a)):
        if emulated.emulated and set(real.timings) - real.emulated:
            return (f"{emulated.ref} was timed on emulated devices "
                    f"({', '.join(sorted(emulated.emulated))}), {real.ref} on real ones "
                    f"({', '.join(sorted(set(real.timings) - real.emulated))}); an emulator's "
                    "timings are never compared with a real device's")
    return None


def load_side(store: Store, ref: str) -> Side:
    """Read one side: a job id (``"12"``), a run id (``"r-..."``), or ``"12:untuned"``.

    ``JOB:untuned`` is a ``tune --model`` job's untuned timings of each phone;
    the job itself (``JOB`` or ``JOB:tuned``) is its tuned ones.

    Raises:
        UserFault: no such job or run; a job not succeeded (a run's failed or
            cancelled jobs are left out, but none may still be queued or
            running); several workloads; samples that are not timings;
            ``:untuned`` of a job that is no model tune.
    """
    base, untuned = split_ref(ref)
    label, jobs = _jobs_of(store, base)
    if not untuned:
        return side_of(store, label, jobs)
    if len(jobs) != 1:
        raise UserFault(f"{ref!r}: ':untuned' follows a tune job's id, not a run's")
    [job] = jobs
    timings = untuned_timings(store, job)
    return Side(f"{label}:untuned", kind_of(job.kind).workload(job.spec), timings,
                dict.fromkeys(timings, job.id), build_of(job, untuned=True))
