"""Reservations: the store's operations, the claim's check, the plan and the wait reasons."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from queue_helpers import ARM64, T0, add_ready, gemm_spec, held_phone_select, plan

from farm.errors import ReservationError
from farm.queue import DeviceState, JobState, Store
from farm.queue.scheduler import Assignment
from farm.queue.spec import DeviceSelection
from farm.queue.waiting import wait_reasons

HOUR = timedelta(hours=1)
T1 = T0 + HOUR


class TestReserve:
    def test_reserve_returns_the_phone_key_and_an_event(self, store: Store) -> None:
        """A reservation names the phone's own tracker key and leaves an event row."""
        add_ready(store, "p1")
        view = store.reserve("p1", "alice", T1, T0, key_prefix="android")
        assert (view.serial, view.owner, view.expires_at) == ("p1", "alice", T1)
        assert view.ended_at is None
        assert view.tracker_key == "android-p1"
        assert view.tracker_host is None and view.tracker_port is None  # no hosts row
        assert view.active(T0) and not view.active(T1)
        assert store.device_events("p1", limit=1)[0].reason == (
            "reserved by alice until 2025-06-01T13:00Z"
        )

    def test_unknown_serial_is_refused(self, store: Store) -> None:
        """A serial never seen is a one-line error."""
        with pytest.raises(ReservationError, match="nope: unknown serial"):
            store.reserve("nope", "alice", T1, T0)

    def test_an_end_before_the_start_is_refused(self, store: Store) -> None:
        """A reservation must end after it starts."""
        add_ready(store, "p1")
        with pytest.raises(ReservationError, match="must end after"):
            store.reserve("p1", "alice", T0, T0)

    def test_another_owner_is_refused_with_who_and_until(self, store: Store) -> None:
        """A second owner is told who holds the phone and until when."""
        add_ready(store, "p1")
        store.reserve("p1", "alice", T1, T0)
        with pytest.raises(ReservationError, match="reserved by alice until 2025-06-01T13:00Z"):
            store.reserve("p1", "bob", T1, T0)

    def test_the_same_owner_moves_the_end(self, store: Store) -> None:
        """Reserving again as the owner extends the one reservation."""
        add_ready(store, "p1")
        first = store.reserve("p1", "alice", T1, T0)
        again = store.reserve("p1", "alice", T1 + HOUR, T0)
        assert again.id == first.id and again.expires_at == T1 + HOUR
        assert len(store.reservations()) == 1

    def test_an_expired_one_gives_way(self, store: Store) -> None:
        """After its end time a reservation no longer blocks another owner."""
        add_ready(store, "p1")
        store.reserve("p1", "alice", T1, T0)
        bob = store.reserve("p1", "bob", T1 + HOUR, T1)
        assert bob.owner == "bob"
        ended = [r for r in store.reservations(active=False) if r.owner == "alice"]
        assert ended[0].end_reason == "expired"

    def test_a_busy_phone_may_be_reserved(self, store: Store) -> None:
        """Reserving a busy phone is allowed; it takes effect when its attempt ends."""
        add_ready(store, "p1")
        store.enqueue(gemm_spec(), T0)
        assert store.claim(plan(store.snapshot(), T0), T0)
        view = store.reserve("p1", "alice", T1, T0)
        assert view.active(T0)
        assert store.get_device("p1").state is DeviceState.BUSY  # type: ignore[union-attr]


class TestReserveMatching:
    def test_picks_a_free_matching_phone(self, store: Store) -> None:
        """Only a ready, undrained, unreserved phone that matches is picked."""
        add_ready(store, "p1", "p2", "p3")
        add_ready(store, "other", facts={**ARM64, "soc": "SM8450"})
        store.set_drained("p1", True, "test", T0)
        store.reserve("p2", "bob", T1, T0)
        view = store.reserve_matching(DeviceSelection(soc="sm8150"), "alice", T1, T0)
        assert view.serial == "p3"

    def test_none_free_is_a_one_line_error(self, store: Store) -> None:
        """With every match taken the error names the selection."""
        add_ready(store, "p1")
        store.reserve("p1", "bob", T1, T0)
        with pytest.raises(ReservationError, match="no free device matches abi=arm64-v8a"):
            store.reserve_matching(DeviceSelection(abi="arm64-v8a"), "alice", T1, T0)


class TestUnreserve:
    def test_owner_ends_it(self, store: Store) -> None:
        """The owner's unreserve ends it with its reason."""
        add_ready(store, "p1")
        store.reserve("p1", "alice", T1, T0)
        ended = store.unreserve("p1", "alice", T0)
        assert ended.ended_at == T0 and ended.end_reason == "unreserved"
        assert store.reservations() == []

    def test_another_owner_cannot(self, store: Store) -> None:
        """Another owner's unreserve is refused; the operator's (owner None) is not."""
        add_ready(store, "p1")
        store.reserve("p1", "alice", T1, T0)
        with pytest.raises(ReservationError, match="reserved by another owner"):
            store.unreserve("p1", "bob", T0)
        assert store.unreserve("p1", None, T0, "operator").end_reason == "operator"

    def test_not_reserved(self, store: Store) -> None:
        """Ending a reservation that is not there (or expired) is an error."""
        add_ready(store, "p1")
        with pytest.raises(ReservationError, match="p1: not reserved"):
            store.unreserve("p1", "alice", T0)
        store.reserve("p1", "alice", T1, T0)
        with pytest.raises(ReservationError, match="not reserved"):
            store.unreserve("p1", "alice", T1)


class TestExpiry:
    def test_expire_ends_only_due_ones(self, store: Store) -> None:
        """expire_reservations ends those at or past their end time, once."""
        add_ready(store, "p1", "p2")
        store.reserve("p1", "alice", T1, T0)
        store.reserve("p2", "bob", T1 + HOUR, T0)
        assert store.expire_reservations(T0) == []
        ended = store.expire_reservations(T1)
        assert [(r.serial, r.end_reason) for r in ended] == [("p1", "expired")]
        assert store.expire_reservations(T1) == []
        assert [r.serial for r in store.reservations()] == ["p2"]
        assert [r.serial for r in store.reservations(now=T1 + HOUR)] == []


class TestScheduling:
    def test_plan_skips_a_reserved_phone_until_it_expires(self, store: Store) -> None:
        """The plan gives the job to the unreserved phone, and the reserved one after expiry."""
        add_ready(store, "p1", "p2")
        store.reserve("p1", "alice", T1, T0)
        store.enqueue(gemm_spec(), T0)
        store.enqueue(gemm_spec(), T0)
        assert [a.serials for a in plan(store.snapshot(), T0)] == [("p2",)]
        assert sorted(a.serials for a in plan(store.snapshot(), T1)) == [("p1",), ("p2",)]

    def test_claim_refuses_a_reserved_phone(self, store: Store) -> None:
        """A claim planned before the reservation is refused in the claim's transaction."""
        add_ready(store, "p1")
        job_id = store.enqueue(gemm_spec(), T0)
        stale = plan(store.snapshot(), T0)
        assert stale == [Assignment(job_id, ("p1",), stale[0].lease_s)]
        store.reserve("p1", "alice", T1, T0)
        assert store.claim(stale, T0) == []
        assert store.get_job(job_id).state is JobState.QUEUED  # type: ignore[union-attr]
        assert store.claim(stale, T1)  # expired, not yet ended: free anyway

    def test_wait_reason_names_owner_and_end(self, store: Store) -> None:
        """A job waiting on a reserved phone says who holds it until when."""
        add_ready(store, "p1")
        store.reserve("p1", "alice", T1, T0)
        job_id = store.enqueue(gemm_spec(), T0)
        reasons = wait_reasons(store.snapshot(), T0)
        assert reasons[job_id] == "the only match is reserved by alice until 2025-06-01T13:00Z"


class TestRaces:
    def test_one_of_many_racing_owners_wins(self, store_url: str) -> None:
        """Owners reserving one phone at once from their own stores: exactly one holds it."""
        with Store(store_url) as setup:
            add_ready(setup, "p1")
        owners = [f"o{i}" for i in range(6)]
        barrier = threading.Barrier(len(owners))
        won: list[str] = []
        refused: list[str] = []

        def reserve(owner: str) -> None:
            with Store(store_url) as store:
                barrier.wait()
                try:
                    won.append(store.reserve("p1", owner, T1, T0).owner)
                except ReservationError as exc:
                    refused.append(str(exc))

        threads = [threading.Thread(target=reserve, args=(o,)) for o in owners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(won) == 1 and len(refused) == len(owners) - 1
        with Store(store_url) as store:
            assert [r.owner for r in store.reservations()] == won

    @pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
    def test_a_reservation_committed_while_a_claim_selects_its_phone_wins(
        self, store_url: str
    ) -> None:
        """The claim's select of ready, unreserved phones is held (``pg_sleep``) after its
        snapshot began, a reservation of its phone commits meanwhile, then the select
        locks the phone: the claim must see the reservation and start nothing.

        PostgreSQL's FOR UPDATE rechecks only the locked row, which a reservation does
        not change, so the select's NOT EXISTS keeps the snapshot's answer. PostgreSQL
        only: SQLite writes one transaction at a time, so there is no race to stage.
        """
        with Store(store_url) as setup:
            add_ready(setup, "p0")
            job_id = setup.enqueue(gemm_spec(), T0)
        claims: list[Any] = []
        with (held_phone_select(store_url) as wait_held, Store(store_url) as claiming,
              Store(store_url) as reserving):
            thread = threading.Thread(target=lambda: claims.extend(
                claiming.claim([Assignment(job_id, ("p0",), 60.0)], T0)))
            thread.start()
            wait_held()
            reserving.reserve("p0", "alice", T1, T0)
            thread.join(60)
        assert claims == []
        with Store(store_url) as store:
            assert not [e for e in store.device_events("p0") if e.reason.startswith("job ")]
            assert store.get_job(job_id).state is JobState.QUEUED  # type: ignore[union-attr]

    def test_a_claim_and_a_reservation_never_both_take_an_idle_phone(
        self, store_url: str
    ) -> None:
        """Racing claims and reservations of idle phones: no reserved phone starts a job after."""
        with Store(store_url) as setup:
            add_ready(setup, "p0", "p1", "p2")
            job_ids = [setup.enqueue(gemm_spec(), T0) for _ in range(3)]
            assignments = [Assignment(j, (f"p{i}",), 60.0) for i, j in enumerate(job_ids)]
        barrier = threading.Barrier(2)
        claimed: list[str] = []

        def claim() -> None:
            with Store(store_url) as store:
                barrier.wait()
                for assignment in assignments:
                    claimed.extend(s for c in store.claim([assignment], T0)
                                   for s in c.attempt.serials)

        def reserve() -> None:
            with Store(store_url) as store:
                barrier.wait()
                for serial in ("p0", "p1", "p2"):
                    store.reserve(serial, "alice", T1, T0)

        threads = [threading.Thread(target=claim), threading.Thread(target=reserve)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        with Store(store_url) as store:
            for serial in ("p0", "p1", "p2"):
                # Newest first, in the order the row lock let each write in.
                reasons = [e.reason for e in store.device_events(serial)]
                reserved = next(i for i, r in enumerate(reasons) if r.startswith("reserved by"))
                started = [i for i, r in enumerate(reasons) if r.startswith("job ")]
                # Claimed only before its reservation (a busy phone may be reserved), never after.
                assert all(i > reserved for i in started)
                assert bool(started) == (serial in claimed)
            assert {r.serial for r in store.reservations()} == {"p0", "p1", "p2"}
