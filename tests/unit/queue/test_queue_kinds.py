"""A job of a kind this farmd does not know (a newer farmd's row in a shared database).

The scheduler must not raise on it (a KeyError in ``plan()`` would stall every
tick), nor start it: a host that does not know the kind would only fail it. It
stays queued, saying why, for a host that knows it, and the jobs behind it run.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from queue_helpers import LEASES, T0, add_ready, gemm_spec

from farm.config import JobSettings
from farm.kinds import KINDS, LeaseByKind
from farm.queue import JobState, QueuedJob, QueueSnapshot, Store
from farm.queue.models import DeviceState, Job
from farm.queue.scheduler import DeviceView, plan
from farm.queue.spec import DeviceSelection
from farm.queue.waiting import wait_reasons

NEWER_KIND = "quantum"
WAITS = (f"job kind {NEWER_KIND!r} is not known to this farm (version 0.1.0): "
         "waits for a host that knows it")


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

    def test_unknown_kind_has_no_lease(self) -> None:
        """An unknown kind is not among the kinds that may start (the plan's keys)."""
        leases = LeaseByKind(JobSettings(lease_s=42.0))
        assert NEWER_KIND not in leases
        assert NEWER_KIND not in leases.keys()  # noqa: SIM118 - the view plan() reads
        with pytest.raises(KeyError):
            leases[NEWER_KIND]


class TestPlanWithUnknownKind:
    def test_plan_leaves_it_and_places_the_jobs_behind_it(self) -> None:
        """plan() neither raises nor starts a job of an unknown kind; the next job runs."""
        jobs = [QueuedJob(1, NEWER_KIND, 5, T0, DeviceSelection()),
                QueuedJob(2, "gemm", 0, T0, DeviceSelection())]
        devices = [DeviceView(s, DeviceState.READY) for s in ("A", "B")]
        assignments = plan(QueueSnapshot(jobs, devices), T0,
                           lease_s_by_kind=LeaseByKind(JobSettings()))
        assert [a.job_id for a in assignments] == [2]


class TestUnknownKindWaits:
    def test_it_stays_queued_with_the_reason_and_the_queue_goes_on(self, store: Store) -> None:
        """No attempt starts it (none can fail it); it says why it waits; the next job runs."""
        add_ready(store, "P1", "P2")
        unknown = store.enqueue(gemm_spec(priority=5), T0)
        _rewrite_kind(store, unknown, NEWER_KIND)
        behind = store.enqueue(gemm_spec(), T0 + timedelta(seconds=1))

        later = T0 + timedelta(seconds=5)
        head = store.head(later, kinds=LEASES.keys())
        (claim,) = store.claim(plan(head, later, lease_s_by_kind=LEASES), later)
        assert claim.job.id == behind

        job = store.get_job(unknown)
        assert job is not None and job.state is JobState.QUEUED
        assert (job.attempts_made, store.attempts(unknown), job.error) == (0, [], None)
        reasons = wait_reasons(store.snapshot(), later, known_kinds=list(KINDS))
        assert reasons[unknown] == WAITS


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

    def test_only_a_model_tune_takes_helper_attempts(self) -> None:
        """The kinds' helper hook: a model tune takes helpers, a gemm tune and other kinds none."""
        takes = {name: kind.helper_attempts for name, kind in KINDS.items()
                 if kind.helper_attempts is not None}
        assert list(takes) == ["tune"]
        assert takes["tune"]({"model": {"sha256": "ab"}}) is True
        assert takes["tune"]({"gemm": {"n": 64}}) is False

    def test_each_kind_says_which_model_build_it_times(self) -> None:
        """The timed-model hook: a model job its own build (``--tuned N``'s records or
        none), a model tune its own tuned build, a gemm or a gemm tune no model."""
        model = {"sha256": "ab", "tuned": 7}
        assert KINDS["model"].timed_model is not None
        assert KINDS["tune"].timed_model is not None
        assert KINDS["gemm"].timed_model is None
        by_model = KINDS["model"].timed_model(3, model)
        assert by_model is not None and (by_model.tuned_by, by_model.own_tuning) == (7, False)
        by_tune = KINDS["tune"].timed_model(9, {"model": model})
        assert by_tune is not None and (by_tune.tuned_by, by_tune.own_tuning) == (9, True)
        assert KINDS["tune"].timed_model(9, {"gemm": {"n": 64}}) is None
