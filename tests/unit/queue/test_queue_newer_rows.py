"""Rows a newer farm wrote into the shared database: a job state this farm does not know.

A newer farm may add a job state (``paused``). This farm reads such a job as
:attr:`JobState.UNKNOWN` and keeps the stored word to show (``paused (unknown)``);
it never starts, cancels or rewrites it.
"""

from __future__ import annotations

import sqlalchemy as sa
from queue_helpers import LEASES, T0, add_ready, gemm_spec, plan

from farm.queue import JobState, Store


def write_state(store: Store, job_id: int, state: str) -> None:
    """Write a job's state as a newer farm does, past this farm's store (which refuses it)."""
    with store._engine.begin() as connection:
        connection.execute(sa.text("UPDATE jobs SET state = :state WHERE id = :id"),
                           {"state": state, "id": job_id})


def stored_state(store: Store, job_id: int) -> str:
    """The job's state as the database holds it."""
    with store._engine.begin() as connection:
        return str(connection.execute(sa.text("SELECT state FROM jobs WHERE id = :id"),
                                      {"id": job_id}).scalar_one())


class TestUnknownJobState:
    def test_it_reads_as_unknown_keeping_the_stored_word(self, store: Store) -> None:
        """get_job and list_jobs read unknown, keep ``paused``, show ``paused (unknown)``."""
        paused = store.enqueue(gemm_spec(), T0)
        queued = store.enqueue(gemm_spec(), T0)
        write_state(store, paused, "paused")

        view = store.get_job(paused)
        assert view is not None
        assert (view.state, view.unknown_state, view.shown_state) == (
            JobState.UNKNOWN, "paused", "paused (unknown)")
        listed = {v.id: v for v in store.list_jobs()}
        assert listed[paused] == view
        assert (listed[queued].unknown_state, listed[queued].shown_state) == (None, "queued")

    def test_state_unknown_lists_the_jobs_in_any_state_this_farm_does_not_know(
        self, store: Store
    ) -> None:
        """``--state unknown`` selects the newer farm's states; ``--state queued`` does not."""
        paused, frozen, queued = (store.enqueue(gemm_spec(), T0) for _ in range(3))
        write_state(store, paused, "paused")
        write_state(store, frozen, "frozen")
        assert [v.id for v in store.list_jobs([JobState.UNKNOWN])] == [frozen, paused]
        assert [v.id for v in store.list_jobs([JobState.QUEUED, JobState.UNKNOWN])] == [
            queued, frozen, paused]
        assert [v.id for v in store.list_jobs([JobState.QUEUED])] == [queued]

    def test_counts_add_every_unknown_state_up(self, store: Store) -> None:
        """farmd's job gauge reads two unknown states as one count of 2, not a LookupError."""
        paused, frozen, _ = (store.enqueue(gemm_spec(), T0) for _ in range(3))
        write_state(store, paused, "paused")
        write_state(store, frozen, "frozen")
        assert store.job_counts() == {JobState.QUEUED: 1, JobState.UNKNOWN: 2}

    def test_it_is_never_started_nor_cancelled_here(self, store: Store) -> None:
        """The plan leaves it, cancel refuses it, and the stored state stays the newer farm's."""
        add_ready(store, "P1")
        paused = store.enqueue(gemm_spec(), T0)
        write_state(store, paused, "paused")
        assert plan(store.snapshot(), T0) == []
        assert store.head(T0, kinds=LEASES.keys()).jobs == []
        assert store.cancel(paused, T0) is False
        assert stored_state(store, paused) == "paused"
