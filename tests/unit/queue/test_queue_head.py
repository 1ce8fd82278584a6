"""The head of the queue: a tick reads few queued jobs and decides as over all of them.

Every test runs on SQLite and on PostgreSQL (tests/unit/conftest.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from queue_helpers import ARM64, LEASES, T0, add_ready, plan

from farm.queue import Store
from farm.queue.models import DeviceState
from farm.queue.scheduler import plan as scheduler_plan

PIXEL = {**ARM64, "model": "Pixel 8", "soc": "Tensor G3", "has_opencl": False}
A52 = {**ARM64, "model": "SM-A525F", "soc": "SM7125", "has_opencl": True}
PHONES = {"p1": PIXEL, "p2": PIXEL, "p3": PIXEL, "a1": A52, "a2": A52, "a3": A52}

#: Specs of the mix, without priority and times: plain, OpenCL, pinned, by SoC,
#: two phones, a two-phone tune (phones of one model).
SPECS: list[dict[str, Any]] = [
    {"kind": "gemm", "params": {"n": 64}},
    {"kind": "gemm", "params": {"n": 64, "bn": 16, "target": "opencl"}},
    {"kind": "gemm", "params": {"n": 64}, "devices": {"serials": ["p1"]}},
    {"kind": "gemm", "params": {"n": 64}, "devices": {"soc": "SM7125"}},
    {"kind": "gemm", "params": {"n": 64}, "devices": {"count": 2}},
    {"kind": "tune", "params": {"gemm": {"n": 64}, "trials": 4, "phones": 2}},
]

AGING_STEP_S = 600.0

job_strategy = st.tuples(
    st.sampled_from(range(len(SPECS))),
    st.integers(-3, 3),  # priority
    st.integers(0, 8 * 3600),  # age at T0, s
    st.one_of(st.none(), st.integers(-3600, 3600)),  # not_before relative to T0, s
)


@pytest.fixture
def fleet(store: Store) -> Store:
    """Six ready phones of two models."""
    for serial, facts in PHONES.items():
        add_ready(store, serial, facts=facts)
    return store


def enqueue(store: Store, jobs: list[tuple[int, int, int, int | None]]) -> list[int]:
    """Store the drawn jobs; return their ids."""
    ids = []
    for spec_index, priority, age_s, not_before_s in jobs:
        spec = {**SPECS[spec_index], "priority": priority}
        if not_before_s is not None:
            spec["not_before"] = (T0 + timedelta(seconds=not_before_s)).isoformat()
        ids.append(store.enqueue(spec, T0 - timedelta(seconds=age_s)))
    return ids


class TestSameDecisions:
    """plan() over the head decides exactly as plan() over every queued job."""

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        jobs=st.lists(job_strategy, min_size=10, max_size=80),  # pages of 16 to 24
        drained=st.sets(st.sampled_from(sorted(PHONES))),
        later_s=st.integers(0, 4 * 3600),
        seed=st.integers(0, 1000),
        kinds=st.sampled_from([None, ("gemm",), ("tune",)]),
    )
    def test_head_plans_as_the_whole_queue(
        self,
        fleet: Store,
        jobs: list[tuple[int, int, int, int | None]],
        drained: set[str],
        later_s: int,
        seed: int,
        kinds: tuple[str, ...] | None,
    ) -> None:
        """Any queue, drained phones, time, seed and kinds: the same assignments."""
        store = fleet
        ids = enqueue(store, jobs)
        for serial in drained:
            store.set_drained(serial, True, "test", T0)
        try:
            now = T0 + timedelta(seconds=later_s)
            leases = LEASES if kinds is None else {k: LEASES[k] for k in kinds}
            head = store.head(now, seed=seed, kinds=leases.keys(), aging_step_s=AGING_STEP_S)
            whole = store.snapshot()
            options: dict[str, Any] = {"seed": seed, "aging_step_s": AGING_STEP_S}
            expected = scheduler_plan(whole, now, lease_s_by_kind=leases, **options)
            assert scheduler_plan(head, now, lease_s_by_kind=leases, **options) == expected
            assert {j.id for j in head.jobs} <= {j.id for j in whole.jobs}
        finally:
            for job_id in ids:
                store.cancel(job_id, T0)
            for serial in drained:
                store.set_drained(serial, False, "test", T0)


class TestReadsLittle:
    """A tick reads a page of the queue, not the queue."""

    def test_one_free_phone_reads_one_page_of_a_long_queue(self, store: Store) -> None:
        """500 queued jobs, one free phone: the head holds at most a page, led by the first job."""
        add_ready(store, "p1")
        ids = [store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0) for _ in range(500)]
        head = store.head(T0, kinds=LEASES.keys())
        assert 0 < len(head.jobs) <= 16
        assert [a.job_id for a in plan(head, T0)] == [ids[0]]

    def test_no_free_phone_reads_no_job(self, store: Store) -> None:
        """Every phone busy or drained: nothing to decide, no job read."""
        add_ready(store, "p1")
        store.set_drained("p1", True, "test", T0)
        store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        assert store.head(T0).jobs == []

    def test_aged_job_deep_in_the_queue_is_found(self, store: Store) -> None:
        """A low-priority job that aged past 100 fresh ones is read and placed first."""
        add_ready(store, "p1")
        old = store.enqueue({"kind": "gemm", "params": {"n": 64}, "priority": -2}, T0)
        later = T0 + timedelta(hours=1)  # 6 aging steps: effective priority 4
        for _ in range(100):
            store.enqueue({"kind": "gemm", "params": {"n": 64}, "priority": 3}, later)
        head = store.head(later, kinds=LEASES.keys())
        assert [a.job_id for a in plan(head, later)] == [old]

    def test_unready_phone_states_are_not_free(self, store: Store) -> None:
        """Only ready phones make the head read: an unhealthy one does not."""
        add_ready(store, "p1")
        store.move_device("p1", DeviceState.UNHEALTHY, "test", T0,
                          expect_state=DeviceState.READY)
        store.enqueue({"kind": "gemm", "params": {"n": 64}}, T0)
        assert store.head(T0).jobs == []

    def test_jobs_of_one_selection_share_one_decoded_selection(self, store: Store) -> None:
        """The matcher matches phones once per selection object: head and snapshot share them."""
        add_ready(store, "p1")
        spec = {"kind": "gemm", "params": {"n": 64}, "devices": {"soc": "SM8150"}}
        for _ in range(3):
            store.enqueue(spec, T0)
        selections = {id(j.devices) for j in [*store.head(T0).jobs, *store.snapshot().jobs]}
        assert len(selections) == 1
