"""A job of a kind this farmd does not know (a newer farmd's row in a shared database).

The scheduler must not raise on it (a KeyError in ``plan()`` would stall every
tick); its attempt fails it with the reason, and the jobs behind it run.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from queue_helpers import T0, add_ready, gemm_spec

from farm.config import JobSettings, Settings
from farm.kinds import KINDS, LeaseByKind
from farm.queue import JobState, QueuedJob, QueueSnapshot, Store
from farm.queue.models import DeviceState, Job
from farm.queue.scheduler import DeviceView, plan
from farm.queue.spec import DeviceSelection
from farm.runner.child import EXIT_FAILED, run_attempt

NEWER_KIND = "quantum"


def _rewrite_kind(store: Store, job_id: int, kind: str) -> None:
    """Make a stored job look as a newer farmd would have written it."""
    # A row no farmctl of this version can write, so it is written through the session.
    with store._tx() as session:
        job = session.get(Job, job_id)
        assert job is not None
        job.kind = kind
        job.spec = {**job.spec, "kind": kind, "params": {"qubits": 5}}


class TestLeaseByKind:
    def test_every_registered_kind_has_its_configured_lease(self) -> None:
        """Known kinds read their lease from the config; tune's is the long one."""
        jobs = JobSettings(lease_s=30.0, tune_lease_s=900.0)
        leases = LeaseByKind(jobs)
        assert set(leases) == set(KINDS)
        assert (leases["gemm"], leases["model"], leases["tune"]) == (30.0, 30.0, 900.0)

    def test_unknown_kind_gets_the_default_lease(self) -> None:
        """An unknown kind is not a KeyError: it gets jobs.lease_s."""
        assert LeaseByKind(JobSettings(lease_s=42.0))[NEWER_KIND] == 42.0


class TestPlanWithUnknownKind:
    def test_plan_places_it_and_the_jobs_behind_it(self) -> None:
        """plan() neither raises nor stops at a job of an unknown kind."""
        jobs = [QueuedJob(1, NEWER_KIND, 5, T0, DeviceSelection()),
                QueuedJob(2, "gemm", 0, T0, DeviceSelection())]
        devices = [DeviceView(s, DeviceState.READY) for s in ("A", "B")]
        assignments = plan(QueueSnapshot(jobs, devices), T0,
                           lease_s_by_kind=LeaseByKind(JobSettings()))
        assert [a.job_id for a in assignments] == [1, 2]


class TestUnknownKindAttempt:
    def test_it_fails_with_the_reason_and_the_queue_goes_on(
        self, store: Store, store_url: str, tmp_path: Path
    ) -> None:
        """The attempt's child fails the job (no retry) naming the kind; the next job runs."""
        add_ready(store, "P1")
        unknown = store.enqueue(gemm_spec(), T0)
        _rewrite_kind(store, unknown, NEWER_KIND)
        behind = store.enqueue(gemm_spec(), T0 + timedelta(seconds=1))
        leases = LeaseByKind(JobSettings())

        (claim,) = store.claim(plan(store.snapshot(), T0, lease_s_by_kind=leases), T0)
        assert claim.job.id == unknown
        settings = Settings(data_dir=tmp_path / "data", database_url=store_url)
        code = run_attempt(settings, unknown, claim.attempt.id, tmp_path / "run")

        assert code == EXIT_FAILED
        job = store.get_job(unknown)
        assert job is not None and job.state is JobState.FAILED
        assert job.error is not None and f"unknown job kind {NEWER_KIND!r}" in job.error
        assert job.attempts_made == 1  # not retried: a SpecError is the job's, not a phone's
        later = T0 + timedelta(seconds=5)
        (next_claim,) = store.claim(plan(store.snapshot(), later, lease_s_by_kind=leases), later)
        assert (next_claim.job.id, next_claim.attempt.serials) == (behind, ("P1",))


class TestKindDeclarations:
    def test_target_of_each_kind(self) -> None:
        """Each kind says which processor a stored spec runs on (its needs), for matching facts."""
        specs = {
            "gemm": {"kind": "gemm", "params": {"n": 64, "target": "opencl"}},
            "model": {"kind": "model", "params": {"path": "/m.onnx"}},
            "tune": {"kind": "tune", "params": {"gemm": {"n": 64, "target": "vulkan"}}},
        }
        assert {name: KINDS[name].needs(spec).target for name, spec in specs.items()} == {
            "gemm": "opencl", "model": "cpu", "tune": "vulkan",
        }

    def test_every_kind_runs_its_own_spec_model(self) -> None:
        """Each registry entry's spec model carries its own name as ``kind``."""
        for name, kind in KINDS.items():
            assert kind.name == name
            assert kind.spec.model_fields["kind"].annotation.__args__ == (name,)  # type: ignore[union-attr]
