"""Tests of farm.queue.scheduler.plan, capabilities and wait reasons: properties over random
fleets and queues, the rules one by one, and the CLI that shows them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st
from queue_helpers import ARM64, LEASES, add_ready, plan

from farm.cli.main import cli
from farm.queue import Store
from farm.queue.capabilities import ANY_PHONE, Requirements, group_key, requirements, unmet
from farm.queue.models import DeviceState
from farm.queue.scheduler import (
    DeviceView,
    QueuedJob,
    QueueSnapshot,
    effective_priority,
    fits,
    matches,
)
from farm.queue.scheduler import plan as scheduler_plan
from farm.queue.spec import DeviceSelection, JobSpec, parse_spec
from farm.queue.waiting import refusal, wait_reasons

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
SERIALS = [f"phone{i:02d}" for i in range(10)]
ABIS = ["arm64-v8a", "armeabi-v7a"]
SOCS = ["SM8150", "MT6785"]
GPUS = ["Adreno (TM) 640", "Mali-G76"]


# Strategies are built once here: building them inside each draw makes
# hypothesis recompute their properties every time (10x slower).
MODELS = ["Pixel 8", "SM-A525F", "SM-G973F"]
GPU_LIMITS = st.none() | st.fixed_dictionaries(
    {"opencl": st.fixed_dictionaries({"max_threads_per_block": st.sampled_from([256, 1024])})}
)
FACTS = st.fixed_dictionaries(
    {
        "abi": st.sampled_from(ABIS),
        "soc": st.sampled_from(SOCS),
        "sdk": st.integers(26, 34),
        "gpu": st.sampled_from(GPUS),
        "model": st.sampled_from(MODELS),
        "has_opencl": st.booleans(),
        "has_vulkan": st.booleans(),
        "gpu_limits": GPU_LIMITS,
    }
)
NEEDS = st.builds(
    Requirements,
    target=st.sampled_from(["cpu", "cpu", "opencl", "vulkan"]),
    work_group_threads=st.sampled_from([0, 64, 256, 1024]),
    alike=st.booleans(),
)
# Half the phones ready and most undrained, so plans are rarely empty.
DEVICE = st.tuples(
    st.just(DeviceState.READY) | st.sampled_from(list(DeviceState)),
    st.sampled_from([False, False, False, True]),
    FACTS,
)
OPTIONAL_SERIALS = st.none() | st.lists(
    st.sampled_from(SERIALS), unique=True, min_size=1, max_size=5
)
OPTIONAL_ABI = st.none() | st.sampled_from(ABIS)
OPTIONAL_SOC = st.none() | st.sampled_from(SOCS)
OPTIONAL_SDK = st.none() | st.integers(26, 34)
OPTIONAL_GPU = st.none() | st.sampled_from(["adreno", "mali"])
OPTIONAL_NOT_BEFORE = st.none() | st.integers(-600, 600).map(lambda s: T0 + timedelta(seconds=s))
EXCLUDED = st.frozensets(st.sampled_from(SERIALS), max_size=2)


@st.composite
def devices(draw: st.DrawFn) -> list[DeviceView]:
    serials = draw(st.lists(st.sampled_from(SERIALS), unique=True, max_size=8))
    return [DeviceView(serial, *draw(DEVICE)) for serial in serials]


@st.composite
def selections(draw: st.DrawFn) -> DeviceSelection:
    serials = draw(OPTIONAL_SERIALS)
    return DeviceSelection(
        serials=serials,
        abi=draw(OPTIONAL_ABI),
        soc=draw(OPTIONAL_SOC),
        sdk_min=draw(OPTIONAL_SDK),
        gpu=draw(OPTIONAL_GPU),
        count=draw(st.integers(1, len(serials) if serials else 3)),
        prefer_serials=draw(OPTIONAL_SERIALS),
    )


JOB = st.tuples(
    st.sampled_from(["gemm", "model", "tune"]),
    st.integers(-5, 5),
    st.integers(0, 7200).map(lambda s: T0 - timedelta(seconds=s)),
    selections(),
    OPTIONAL_NOT_BEFORE,
    EXCLUDED,
    OPTIONAL_NOT_BEFORE,
    NEEDS,
)


@st.composite
def jobs(draw: st.DrawFn) -> list[QueuedJob]:
    return [QueuedJob(i + 1, *fields) for i, fields in enumerate(draw(st.lists(JOB, max_size=15)))]


def assigned_serials(assignments: Sequence) -> list[str]:
    return [s for a in assignments for s in a.serials]


class TestPlanProperties:
    """Invariants that hold for every fleet and queue."""

    @settings(max_examples=200, deadline=None)
    @given(fleet=devices(), queue=jobs(), seed=st.integers(0, 2**32))
    def test_no_phone_gets_two_jobs(
        self, fleet: list[DeviceView], queue: list[QueuedJob], seed: int
    ) -> None:
        """No serial appears in two assignments, nor twice in one, and no job runs twice."""
        assignments = plan(QueueSnapshot(queue, fleet), T0, seed=seed)
        serials = assigned_serials(assignments)
        assert len(serials) == len(set(serials))
        job_ids = [a.job_id for a in assignments]
        assert len(job_ids) == len(set(job_ids))

    @settings(max_examples=200, deadline=None)
    @given(fleet=devices(), queue=jobs(), seed=st.integers(0, 2**32))
    def test_only_ready_matching_phones(
        self, fleet: list[DeviceView], queue: list[QueuedJob], seed: int
    ) -> None:
        """Every assigned phone is ready, undrained and fits its job; jobs get exactly count
        phones."""
        by_serial = {d.serial: d for d in fleet}
        by_id = {j.id: j for j in queue}
        for a in plan(QueueSnapshot(queue, fleet), T0, seed=seed):
            job = by_id[a.job_id]
            assert len(a.serials) == job.devices.count
            assert job.not_before is None or job.not_before <= T0
            assert job.retry_at is None or job.retry_at <= T0
            assert a.lease_s == LEASES[job.kind]
            for serial in a.serials:
                device = by_serial[serial]
                assert device.state is DeviceState.READY and not device.drained
                assert fits(job, device)

    @settings(max_examples=200, deadline=None)
    @given(fleet=devices(), queue=jobs(), seed=st.integers(0, 2**32))
    def test_exclusions_hold_while_others_serve(
        self, fleet: list[DeviceView], queue: list[QueuedJob], seed: int
    ) -> None:
        """A phone that failed a job gets it again only if too few other phones could ever run
        it."""
        in_service = [
            d
            for d in fleet
            if not d.drained
            and d.state
            in (DeviceState.READY, DeviceState.BUSY, DeviceState.COOLING, DeviceState.PROVISIONING)
        ]
        by_id = {j.id: j for j in queue}
        for a in plan(QueueSnapshot(queue, fleet), T0, seed=seed):
            job = by_id[a.job_id]
            if set(a.serials) & job.excluded_serials:
                others = [
                    d for d in in_service if d.serial not in job.excluded_serials and fits(job, d)
                ]
                if job.needs.alike:
                    kinds = [group_key(d.facts) for d in others]
                    assert all(kinds.count(k) < job.devices.count for k in kinds)
                else:
                    assert len(others) < job.devices.count

    @settings(max_examples=200, deadline=None)
    @given(
        ready=st.integers(0, 8),
        priorities=st.lists(st.integers(-100, 100), max_size=20),
        seed=st.integers(0, 2**32),
    )
    def test_priorities_hold_at_equal_age(
        self, ready: int, priorities: list[int], seed: int
    ) -> None:
        """Among eligible one-phone jobs submitted together, no job runs while a higher one
        waits."""
        fleet = [DeviceView(SERIALS[i], DeviceState.READY) for i in range(ready)]
        queue = [
            QueuedJob(i + 1, "gemm", p, T0, DeviceSelection()) for i, p in enumerate(priorities)
        ]
        assignments = plan(QueueSnapshot(queue, fleet), T0 + timedelta(hours=1), seed=seed)
        chosen = {a.job_id for a in assignments}
        assert len(chosen) == min(ready, len(queue))
        waiting = [j.priority for j in queue if j.id not in chosen]
        running = [j.priority for j in queue if j.id in chosen]
        if waiting and running:
            assert min(running) >= max(waiting)

    @settings(max_examples=200, deadline=None)
    @given(
        fleet=devices(),
        queue=jobs(),
        any_phone=st.lists(st.tuples(st.integers(-5, 5), st.integers(0, 7200)), max_size=8),
        seed=st.integers(0, 2**32),
    )
    def test_no_lower_job_runs_before_a_placeable_higher_one(
        self,
        fleet: list[DeviceView],
        queue: list[QueuedJob],
        any_phone: list[tuple[int, int]],
        seed: int,
    ) -> None:
        """While an eligible any-phone job waits, no job of lower effective priority starts."""
        now = T0
        queue = queue + [
            QueuedJob(100 + i, "gemm", p, T0 - timedelta(seconds=age_s), DeviceSelection())
            for i, (p, age_s) in enumerate(any_phone)
        ]
        assignments = plan(QueueSnapshot(queue, fleet), now, seed=seed)
        started = {a.job_id for a in assignments}
        by_id = {j.id: j for j in queue}
        waiting_any_phone = [
            j
            for j in queue
            if j.id not in started
            and j.devices == DeviceSelection()
            and j.needs == Requirements()  # a CPU job: every phone can run it
            and not j.excluded_serials
            and (j.not_before is None or j.not_before <= now)
            and (j.retry_at is None or j.retry_at <= now)
        ]
        for waiting in waiting_any_phone:
            for job_id in started:
                lower = by_id[job_id]
                assert effective_priority(lower, now) >= effective_priority(waiting, now)

    @settings(max_examples=40, deadline=None)
    @given(phones=st.integers(1, 4), gap=st.integers(1, 20), extra=st.integers(1, 2))
    def test_no_starvation_under_a_stream(self, phones: int, gap: int, extra: int) -> None:
        """A low-priority job runs in bounded time while more high-priority jobs arrive than phones
        finish."""
        step_s, tick_s = 60.0, 30.0
        arrivals = phones + extra  # per tick: demand always exceeds supply
        low = QueuedJob(1, "gemm", -gap, T0, DeviceSelection())
        queue = {low.id: low}
        next_id = 2
        # The oldest waiting high job is about t*(1 - phones/arrivals) old at time t,
        # so the low job leads once t*phones/arrivals > (gap+1)*step_s.
        bound_s = (gap + 2) * step_s * arrivals / phones + 2 * tick_s
        now = T0
        while True:
            for _ in range(arrivals):
                queue[next_id] = QueuedJob(next_id, "gemm", 0, now, DeviceSelection())
                next_id += 1
            fleet = [DeviceView(s, DeviceState.READY) for s in SERIALS[:phones]]
            assignments = plan(
                QueueSnapshot(list(queue.values()), fleet), now, seed=next_id, aging_step_s=step_s
            )
            assert len(assignments) == phones
            started = {a.job_id for a in assignments}
            if low.id in started:
                break
            assert (now - T0).total_seconds() <= bound_s, "the low-priority job starved"
            for job_id in started:
                del queue[job_id]  # each runs one tick; phones are ready again next tick
            now += timedelta(seconds=tick_s)


class TestPlanRules:
    """Specific scheduling decisions."""

    def test_not_before_waits(self) -> None:
        """A job whose not_before is in the future is not started; it is once the time comes."""
        job = QueuedJob(1, "gemm", 0, T0, DeviceSelection(), not_before=T0 + timedelta(minutes=5))
        snapshot = QueueSnapshot([job], [DeviceView("a", DeviceState.READY)])
        assert plan(snapshot, T0) == []
        assert [a.job_id for a in plan(snapshot, T0 + timedelta(minutes=5))] == [1]

    def test_aging_lifts_an_old_job(self) -> None:
        """A job waiting ten aging steps beats one nine points higher submitted now."""
        old = QueuedJob(1, "gemm", 0, T0, DeviceSelection())
        new = QueuedJob(2, "gemm", 9, T0 + timedelta(seconds=6000), DeviceSelection())
        now = T0 + timedelta(seconds=6000)
        assert effective_priority(old, now) == 10
        snapshot = QueueSnapshot([new, old], [DeviceView("a", DeviceState.READY)])
        assert [a.job_id for a in plan(snapshot, now)] == [1]

    def test_retry_waits_but_keeps_its_age(self) -> None:
        """A job in retry backoff waits until retry_at, then still outranks younger jobs by age."""
        retried = QueuedJob(
            1, "gemm", 0, T0, DeviceSelection(), retry_at=T0 + timedelta(seconds=6000)
        )
        fresh = QueuedJob(2, "gemm", 5, T0 + timedelta(seconds=5990), DeviceSelection())
        snapshot = QueueSnapshot([fresh, retried], [DeviceView("a", DeviceState.READY)])
        assert [a.job_id for a in plan(snapshot, T0 + timedelta(seconds=5999))] == [2]
        assert [a.job_id for a in plan(snapshot, T0 + timedelta(seconds=6000))] == [1]

    def test_k_phones_at_once_or_wait(self) -> None:
        """A two-phone job with one phone free starts nothing and holds that phone."""
        big = QueuedJob(1, "tune", 5, T0, DeviceSelection(count=2))
        small = QueuedJob(2, "gemm", 0, T0, DeviceSelection())
        fleet = [DeviceView("a", DeviceState.READY), DeviceView("b", DeviceState.BUSY)]
        assert plan(QueueSnapshot([big, small], fleet), T0) == []
        fleet[1] = replace(fleet[1], state=DeviceState.READY)
        (assignment,) = plan(QueueSnapshot([big, small], fleet), T0)
        assert assignment.job_id == 1 and sorted(assignment.serials) == ["a", "b"]
        assert assignment.lease_s == LEASES["tune"] > LEASES["gemm"]

    def test_impossible_job_does_not_block(self) -> None:
        """A job needing more matching phones than the fleet has lets lower jobs run."""
        big = QueuedJob(1, "gemm", 5, T0, DeviceSelection(count=3))
        small = QueuedJob(2, "gemm", 0, T0, DeviceSelection())
        fleet = [DeviceView("a", DeviceState.READY), DeviceView("b", DeviceState.QUARANTINED)]
        assert [a.job_id for a in plan(QueueSnapshot([big, small], fleet), T0)] == [2]

    def test_excluded_phone_used_only_as_last_resort(self) -> None:
        """A phone that failed the job is skipped while another fits, used when none does."""
        job = QueuedJob(1, "gemm", 0, T0, DeviceSelection(), excluded_serials=frozenset({"a"}))
        both = [DeviceView("a", DeviceState.READY), DeviceView("b", DeviceState.BUSY)]
        assert plan(QueueSnapshot([job], both), T0) == []
        alone = [DeviceView("a", DeviceState.READY), DeviceView("b", DeviceState.OFFLINE)]
        assert [a.serials for a in plan(QueueSnapshot([job], alone), T0)] == [("a",)]

    def test_selection_attributes(self) -> None:
        """abi, soc, sdk_min and gpu each narrow the candidates."""
        phone = DeviceView(
            "a",
            DeviceState.READY,
            facts={
                "abi": "arm64-v8a",
                "abis": ["arm64-v8a", "armeabi-v7a"],
                "soc": "SM8150",
                "sdk": 30,
                "gpu": "Adreno (TM) 640",
            },
        )
        assert matches(
            DeviceSelection(abi="armeabi-v7a", soc="sm8150", sdk_min=30, gpu="adreno"), phone
        )
        assert not matches(DeviceSelection(abi="x86_64"), phone)
        assert not matches(DeviceSelection(soc="MT6785"), phone)
        assert not matches(DeviceSelection(sdk_min=31), phone)
        assert not matches(DeviceSelection(gpu="mali"), phone)
        assert not matches(DeviceSelection(serials=["b"]), phone)

    def test_seed_shuffles_which_phone_wins(self) -> None:
        """The same seed picks the same phone; different seeds spread the work."""
        fleet = [DeviceView(s, DeviceState.READY) for s in SERIALS]
        snapshot = QueueSnapshot([QueuedJob(1, "gemm", 0, T0, DeviceSelection())], fleet)
        first = plan(snapshot, T0, seed=1)
        assert plan(snapshot, T0, seed=1) == first
        winners = {plan(snapshot, T0, seed=seed)[0].serials for seed in range(50)}
        assert len(winners) > 3

    def test_preferred_phone_wins_whatever_the_seed(self) -> None:
        """prefer_serials: of ten free phones the preferred one is taken under every shuffle."""
        fleet = [DeviceView(s, DeviceState.READY) for s in SERIALS]
        job = QueuedJob(1, "model", 0, T0, DeviceSelection(prefer_serials=["phone07"]))
        winners = {plan(QueueSnapshot([job], fleet), T0, seed=seed)[0].serials
                   for seed in range(20)}
        assert winners == {("phone07",)}

    def test_a_preference_is_no_limit(self) -> None:
        """A preferred phone busy or gone: the job starts now on another matching phone."""
        fleet = [DeviceView("a", DeviceState.BUSY), DeviceView("b", DeviceState.READY)]
        job = QueuedJob(1, "model", 0, T0, DeviceSelection(prefer_serials=["a", "gone"]))
        assert [a.serials for a in plan(QueueSnapshot([job], fleet), T0)] == [("b",)]

    def test_preferred_phones_fill_a_group_first(self) -> None:
        """Two phones of four wanted, one preferred free: it is one of the two, for every seed."""
        fleet = [DeviceView(s, DeviceState.READY) for s in SERIALS[:4]]
        job = QueuedJob(1, "gemm", 0, T0, DeviceSelection(count=2, prefer_serials=["phone03"]))
        for seed in range(10):
            (assignment,) = plan(QueueSnapshot([job], fleet), T0, seed=seed)
            assert "phone03" in assignment.serials and len(assignment.serials) == 2


# --- capabilities -----------------------------------------------------------------

PIXEL_8 = {"model": "Pixel 8", "soc": "Tensor G3", "has_opencl": False, "has_vulkan": True}
A52 = {"model": "SM-A525F", "soc": "SM7125", "has_opencl": True, "has_vulkan": True}
OPENCL = Requirements(target="opencl", work_group_threads=256)


def ready(serial: str, facts: dict, state: DeviceState = DeviceState.READY) -> DeviceView:
    return DeviceView(serial, state, facts=facts)


class TestCapabilityProperties:
    """Capability invariants over random fleets and queues."""

    @settings(max_examples=300, deadline=None)
    @given(fleet=devices(), queue=jobs(), seed=st.integers(0, 2**32))
    def test_gpu_jobs_only_on_phones_with_that_gpu_api(
        self, fleet: list[DeviceView], queue: list[QueuedJob], seed: int
    ) -> None:
        """An OpenCL (Vulkan) job is never placed on a phone without OpenCL (Vulkan), nor
        on one whose work-group limit (256 when unknown) is below what it needs."""
        by_serial = {d.serial: d for d in fleet}
        by_id = {j.id: j for j in queue}
        for a in plan(QueueSnapshot(queue, fleet), T0, seed=seed):
            needs = by_id[a.job_id].needs
            for serial in a.serials:
                facts = by_serial[serial].facts
                if needs.target != "cpu":
                    assert facts[f"has_{needs.target}"] is True
                    limits = (facts["gpu_limits"] or {}).get(needs.target)
                    limit = limits["max_threads_per_block"] if limits else 256
                    assert needs.work_group_threads <= limit

    @settings(max_examples=300, deadline=None)
    @given(fleet=devices(), queue=jobs(), seed=st.integers(0, 2**32))
    def test_alike_jobs_get_phones_of_one_kind(
        self, fleet: list[DeviceView], queue: list[QueuedJob], seed: int
    ) -> None:
        """Every attempt of a job needing alike phones holds phones of one model and SoC."""
        by_serial = {d.serial: d for d in fleet}
        by_id = {j.id: j for j in queue}
        for a in plan(QueueSnapshot(queue, fleet), T0, seed=seed):
            if by_id[a.job_id].needs.alike:
                assert len({group_key(by_serial[s].facts) for s in a.serials}) == 1


class TestRequirements:
    """capabilities.requirements reads a stored spec."""

    def test_gemm_target_and_work_group(self) -> None:
        """A GPU gemm needs its target and bn*bn threads; a CPU gemm needs nothing."""
        gpu = {"params": {"n": 64, "bn": 16, "target": "opencl"}}
        assert requirements("gemm", gpu) == Requirements("opencl", 256, alike=False)
        assert requirements("gemm", {"params": {"n": 64, "bn": 32, "target": "cpu"}}) == ANY_PHONE

    def test_tune_reads_its_gemm_and_needs_alike_phones(self) -> None:
        """A tune job reads params.gemm and needs phones of one kind."""
        spec = {"params": {"gemm": {"n": 64, "bn": 8, "target": "vulkan"}, "phones": 2}}
        assert requirements("tune", spec) == Requirements("vulkan", 64, alike=True)

    def test_model_and_unknown_kinds_need_nothing(self) -> None:
        """A model job runs on the CPU; a kind this farm does not know needs nothing known."""
        assert requirements("model", {"params": {"path": "/m.onnx"}}) == ANY_PHONE
        assert requirements("futurekind", {"params": {"target": "opencl"}}) == ANY_PHONE

    @settings(max_examples=200, deadline=None)
    @given(
        kind=st.sampled_from(["gemm", "model", "tune", "x"]),
        spec=st.dictionaries(
            st.sampled_from(["params", "devices"]),
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                lambda inner: (
                    st.lists(inner, max_size=3)
                    | st.dictionaries(
                        st.sampled_from(["gemm", "target", "bn", "n", "max_threads_per_block"]),
                        inner,
                        max_size=4,
                    )
                ),
                max_leaves=10,
            ),
        ),
    )
    def test_any_json_reads_without_error(self, kind: str, spec: dict) -> None:
        """A spec of any shape (written by another farmd version) gives requirements, never
        raises."""
        needs = requirements(kind, spec)
        assert isinstance(needs.target, str) and needs.work_group_threads >= 0
        assert unmet(needs, {"has_opencl": True}) is None or needs.target != "cpu"


class TestCapabilityRules:
    """Capability decisions of plan, one by one."""

    def test_opencl_job_skips_a_phone_without_opencl(self) -> None:
        """An OpenCL job goes to the phone with OpenCL, and waits while only others are free."""
        job = QueuedJob(1, "gemm", 0, T0, DeviceSelection(), needs=OPENCL)
        fleet = [ready("pixel", PIXEL_8), ready("a52", A52)]
        assert [a.serials for a in plan(QueueSnapshot([job], fleet), T0)] == [("a52",)]
        fleet[1] = ready("a52", A52, DeviceState.BUSY)
        assert plan(QueueSnapshot([job], fleet), T0) == []

    def test_work_group_limit_from_the_phone(self) -> None:
        """bn=32 (1024 threads) runs only where the phone reported a limit of 1024."""
        job = QueuedJob(1, "gemm", 0, T0, DeviceSelection(), needs=Requirements("opencl", 1024))
        small = ready("small", A52)
        big = ready("big", {**A52, "gpu_limits": {"opencl": {"max_threads_per_block": 1024}}})
        assert [a.serials for a in plan(QueueSnapshot([job], [small, big]), T0)] == [("big",)]
        assert plan(QueueSnapshot([job], [small]), T0) == []

    def test_tune_never_mixes_models(self) -> None:
        """A two-phone tune job with one free Pixel 8 and one free SM-A525F starts nothing."""
        tune = QueuedJob(1, "tune", 0, T0, DeviceSelection(count=2), needs=Requirements(alike=True))
        fleet = [ready("pixel", PIXEL_8), ready("a52", A52)]
        assert plan(QueueSnapshot([tune], fleet), T0) == []
        fleet.append(ready("a52b", A52))
        (assignment,) = plan(QueueSnapshot([tune], fleet), T0)
        assert sorted(assignment.serials) == ["a52", "a52b"]

    def test_tune_holds_the_free_phones_of_its_kind(self) -> None:
        """While its second SM-A525F is busy, a tune job holds the free one, not the Pixel."""
        tune = QueuedJob(1, "tune", 5, T0, DeviceSelection(count=2), needs=Requirements(alike=True))
        small = QueuedJob(2, "gemm", 0, T0, DeviceSelection())
        fleet = [ready("pixel", PIXEL_8), ready("a52", A52), ready("a52b", A52, DeviceState.BUSY)]
        assert [(a.job_id, a.serials) for a in plan(QueueSnapshot([tune, small], fleet), T0)] == [
            (2, ("pixel",))
        ]

    def test_unknown_kind_is_skipped_not_a_key_error(self) -> None:
        """A job of a kind with no lease in a plain lease map waits; the others run.

        (farmd's map, ``farm.kinds.LeaseByKind``, gives every kind a lease: there
        such a job is placed and its child fails it with the reason.)
        """
        future = QueuedJob(1, "futurekind", 9, T0, DeviceSelection())
        gemm = QueuedJob(2, "gemm", 0, T0, DeviceSelection())
        fleet = [ready("a", {}), ready("b", {})]
        leases = {kind: LEASES[kind] for kind in ("gemm", "model", "tune")}
        assigned = scheduler_plan(QueueSnapshot([future, gemm], fleet), T0, lease_s_by_kind=leases)
        assert [a.job_id for a in assigned] == [2]


# --- why a job waits, and what enqueue refuses ---------------------------------------


def gemm(job_id: int = 1, **fields: Any) -> QueuedJob:
    """A queued gemm job submitted at T0."""
    return QueuedJob(job_id, "gemm", fields.pop("priority", 0), T0, DeviceSelection(), **fields)


def reason(jobs: list[QueuedJob], fleet: list[DeviceView], job_id: int = 1, **kw: Any) -> str:
    return wait_reasons(QueueSnapshot(jobs, fleet), T0, **kw)[job_id]


class TestWaitReasons:
    """Each waiting reason, shown for its case."""

    def test_no_phone_matches_the_selection(self) -> None:
        """A SoC no phone has: '0 phones match soc=SM9999'."""
        job = replace(gemm(), devices=DeviceSelection(soc="SM9999"))
        assert reason([job], [ready("a", A52)]) == "0 phones match soc=SM9999"

    def test_no_phone_has_the_capability(self) -> None:
        """An OpenCL job on a fleet without OpenCL says what the selected phones lack."""
        job = gemm(needs=OPENCL)
        assert reason([job], [ready("p", PIXEL_8), ready("q", PIXEL_8)]) == (
            "0 phones match target=opencl (2 selected: no OpenCL)"
        )

    def test_work_group_too_small(self) -> None:
        """bn=32 on OpenCL where the phone allows 256 threads names both numbers."""
        job = gemm(needs=Requirements("opencl", 1024))
        assert reason([job], [ready("a", A52)]) == (
            "0 phones match target=opencl, work-group=1024 "
            "(1 selected: OpenCL work-group limit 256 threads, not 1024)"
        )

    def test_no_phone_known(self) -> None:
        """An empty fleet: '0 phones known'."""
        assert reason([gemm()], []) == "0 phones known"

    def test_both_busy(self) -> None:
        """Two matching phones, both running: '2 match, both busy'."""
        fleet = [ready("a", A52, DeviceState.BUSY), ready("b", A52, DeviceState.BUSY)]
        assert reason([gemm()], fleet) == "2 match, both busy"

    def test_only_match_drained(self) -> None:
        """Pinned to a drained phone: 'the only match is drained'."""
        job = replace(gemm(), devices=DeviceSelection(serials=["a"]))
        fleet = [replace(ready("a", A52), drained=True), ready("b", A52)]
        assert reason([job], fleet) == "the only match is drained"

    def test_mixed_states_are_counted(self) -> None:
        """Three matches in different states are tallied, most common first."""
        fleet = [
            ready("a", A52, DeviceState.BUSY),
            ready("b", A52, DeviceState.BUSY),
            ready("c", A52, DeviceState.QUARANTINED),
        ]
        assert reason([gemm()], fleet) == "3 match: 2 busy, 1 quarantined"

    def test_too_few_phones(self) -> None:
        """--count 5 with 3 matching phones: 'needs 5 phones, 3 match'."""
        job = replace(gemm(), devices=DeviceSelection(count=5))
        fleet = [ready(s, A52) for s in "abc"]
        assert reason([job], fleet) == "needs 5 phones, 3 match"

    def test_too_few_of_one_model(self) -> None:
        """A two-phone tune job on a Pixel 8 and an SM-A525F can never run: it says so."""
        tune = QueuedJob(1, "tune", 0, T0, DeviceSelection(count=2), needs=Requirements(alike=True))
        assert reason([tune], [ready("p", PIXEL_8), ready("a", A52)]) == (
            "needs 2 phones of one model, 2 match but at most 1 of one model"
        )

    def test_holding_its_phones(self) -> None:
        """A two-phone job with one phone free holds it and says what it waits for."""
        job = replace(gemm(), devices=DeviceSelection(count=2))
        fleet = [ready("a", A52), ready("b", A52, DeviceState.BUSY)]
        assert reason([job], fleet) == "needs 2 phones, 2 match: 1 ready (held for it), 1 busy"

    def test_not_before(self) -> None:
        """A job with a future not_before: 'not before 2025-06-01T13:00Z'."""
        job = gemm(not_before=T0 + timedelta(hours=1))
        assert reason([job], [ready("a", A52)]) == "not before 2025-06-01T13:00Z"

    def test_retry_backoff(self) -> None:
        """A retried job in its backoff: 'retry backoff until ...' (seconds shown when set)."""
        job = gemm(retry_at=T0 + timedelta(seconds=90))
        assert reason([job], [ready("a", A52)]) == "retry backoff until 2025-06-01T12:01:30Z"

    def test_held_for_a_higher_priority_job(self) -> None:
        """The free phone went to a higher-priority job: 'the only match is held for ...'."""
        high, low = gemm(1, priority=5), gemm(2)
        assert reason([high, low], [ready("a", A52)], job_id=2) == (
            "the only match is held for a higher-priority job"
        )
        assert reason([high, low], [ready("a", A52)], job_id=1) == "starts at the next tick"

    def test_failed_phone_is_named(self) -> None:
        """A phone that failed the job is skipped while another serves; the reason says why."""
        job = gemm(excluded_serials=frozenset({"a"}))
        fleet = [ready("a", A52), ready("b", A52, DeviceState.BUSY)]
        assert reason([job], fleet) == "2 match: 1 ready but failed this job before, 1 busy"

    def test_unknown_kind(self) -> None:
        """A kind this farm version does not know says so, and that it waits for one that does."""
        job = QueuedJob(1, "futurekind", 0, T0, DeviceSelection())
        assert reason([job], [ready("a", A52)], known_kinds=["gemm"]) == (
            "job kind 'futurekind' is not known to this farm (version 0.1.0): "
            "waits for a host that knows it"
        )


def spec_of(**fields: Any) -> JobSpec:
    return parse_spec({"kind": "gemm", "params": {"n": 64}, **fields})


TUNE_2 = {"kind": "tune", "params": {"gemm": {"n": 64}, "trials": 4, "phones": 2}}


class TestRefusal:
    """What enqueue refuses: jobs no known phone could ever run."""

    def test_runnable_jobs_pass(self) -> None:
        """A job that some phone could run, even a busy or offline one, is not refused."""
        fleet = [ready("a", A52, DeviceState.BUSY), ready("b", A52, DeviceState.OFFLINE)]
        assert refusal(spec_of(devices={"count": 2}), fleet) is None
        assert refusal(parse_spec(TUNE_2), fleet) is None

    def test_nothing_known_refuses_nothing(self) -> None:
        """With no phone known yet there is nothing to judge by: accepted."""
        assert refusal(spec_of(devices={"soc": "SM9999"}), []) is None

    @pytest.mark.parametrize(
        ("fields", "expected"),
        [
            ({"devices": {"soc": "SM9999"}}, "0 phones match soc=SM9999"),
            ({"devices": {"count": 5}}, "needs 5 phones, 3 match"),
            ({"devices": {"serials": ["drained"]}}, "the only match is drained"),
            ({"devices": {"serials": ["quarantined"]}}, "the only match is quarantined"),
            (
                {"devices": {"count": 2, "serials": ["pixel", "drained"]}},
                "needs 2 phones, 2 match: 1 ready, 1 drained",
            ),
            (
                {"params": {"n": 64, "target": "opencl"}},
                "0 phones match target=opencl (3 selected: no OpenCL)",
            ),
        ],
    )
    def test_never_runnable(self, fields: dict, expected: str) -> None:
        """Each job no known phone could ever run is refused with its reason."""
        fleet = [
            ready("pixel", PIXEL_8),
            replace(ready("drained", PIXEL_8), drained=True),
            ready("quarantined", PIXEL_8, DeviceState.QUARANTINED),
        ]
        assert refusal(spec_of(**fields), fleet) == expected

    def test_tune_needs_phones_of_one_model(self) -> None:
        """A two-phone tune on one Pixel 8 and one SM-A525F is refused."""
        fleet = [ready("pixel", PIXEL_8), ready("a52", A52)]
        assert refusal(parse_spec(TUNE_2), fleet) == (
            "needs 2 phones of one model, 2 match but at most 1 of one model"
        )


class TestThroughTheStore:
    """The store's snapshot carries each job's requirements (SQLite and PostgreSQL)."""

    def test_opencl_job_placed_only_on_an_opencl_phone(self, store: Store) -> None:
        """Enqueued, snapshot, planned and claimed: the OpenCL job lands on the OpenCL phone."""
        add_ready(store, "pixel", facts={**ARM64, **PIXEL_8})
        add_ready(store, "a52", facts={**ARM64, **A52})
        job_id = store.enqueue({"kind": "gemm", "params": {"n": 64, "target": "opencl"}}, T0)
        snapshot = store.snapshot()
        assert snapshot.jobs[0].needs == Requirements("opencl", 256)
        [claim] = store.claim(plan(snapshot, T0), T0)
        assert claim.job.id == job_id and claim.attempt.serials == ("a52",)
        second = store.enqueue({"kind": "gemm", "params": {"n": 64, "target": "opencl"}}, T0)
        reasons = wait_reasons(store.snapshot(), T0)
        assert reasons == {second: "the only match is busy"}


class TestCli:
    """farmctl shows the reasons and refuses what cannot run (click's CliRunner)."""

    @pytest.fixture
    def farm(self, tmp_path: Path) -> Iterator[tuple[Callable[..., Result], Store]]:
        config = tmp_path / "farm.toml"
        config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
        runner = CliRunner()

        def farmctl(*args: str) -> Result:
            return runner.invoke(cli, ["--config", str(config), *args], env={"FARM_CONFIG": None})

        assert farmctl("jobs").exit_code == 0  # creates the database
        with Store(f"sqlite:///{tmp_path / 'data' / 'farm.db'}") as store:
            add_ready(store, "pixel", facts={**ARM64, **PIXEL_8})
            yield farmctl, store

    def test_enqueue_refuses_with_the_reason(
        self, farm: tuple[Callable[..., Result], Store]
    ) -> None:
        """An OpenCL job on a fleet without OpenCL exits 2 with one line; nothing is stored."""
        farmctl, store = farm
        result = farmctl("enqueue", "gemm", "--n", "64", "--target", "opencl")
        assert result.exit_code == 2
        assert result.stderr.strip().splitlines() == [
            (
                "Error: no known phone can run this job: 0 phones match target=opencl "
                "(1 selected: no OpenCL) (--wait-for-device queues it for phones not "
                "plugged in yet)"
            )
        ]
        assert store.list_jobs() == []

    def test_wait_for_device_queues_it_and_job_says_why(
        self, farm: tuple[Callable[..., Result], Store]
    ) -> None:
        """--wait-for-device stores it; job ID and jobs (table and --json) say why it waits."""
        farmctl, _ = farm
        result = farmctl("enqueue", "gemm", "--n", "64", "--soc", "SM9999", "--wait-for-device")
        assert result.exit_code == 0, result.output
        why = "0 phones match soc=SM9999"
        assert f"waiting: {why}" in farmctl("job", "1").stdout
        assert json.loads(farmctl("job", "1", "--json").stdout)["waiting"] == why
        assert json.loads(farmctl("jobs", "--json").stdout)[0]["waiting"] == why
        assert "SM9999" in farmctl("jobs").stdout


class TestReasonsAgreeWithPlan:
    """The reasons are computed from plan's own decisions, so they cannot contradict it."""

    @settings(max_examples=200, deadline=None)
    @given(fleet=devices(), queue=jobs())
    def test_starts_now_iff_planned(self, fleet: list[DeviceView], queue: list[QueuedJob]) -> None:
        """A job's reason is 'starts at the next tick' exactly when plan places it."""
        snapshot = QueueSnapshot(queue, fleet)
        placed = {a.job_id for a in plan(snapshot, T0, seed=0)}
        reasons = wait_reasons(snapshot, T0)
        assert {i for i, r in reasons.items() if r == "starts at the next tick"} == placed

    @settings(max_examples=200, deadline=None)
    @given(
        fleet=devices(),
        selection=selections(),
        target=st.sampled_from(["cpu", "opencl", "vulkan"]),
    )
    def test_refused_jobs_could_never_start(
        self, fleet: list[DeviceView], selection: DeviceSelection, target: str
    ) -> None:
        """A refused job is placed by no plan, even once every phone that can come back is ready."""
        spec = spec_of(
            params={"n": 64, "bn": 16, "target": target},
            devices=selection.model_dump(exclude_none=True),
        )
        if refusal(spec, fleet) is None:
            return
        best = [
            d
            if d.drained or d.state is DeviceState.QUARANTINED
            else replace(d, state=DeviceState.READY)
            for d in fleet
        ]
        job = QueuedJob(1, "gemm", 0, T0, spec.devices, needs=requirements("gemm", spec.to_json()))
        assert plan(QueueSnapshot([job], best), T0) == []
