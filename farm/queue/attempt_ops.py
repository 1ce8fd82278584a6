"""The attempts of :class:`farm.queue.store.Store`: plan input, claim, lease, reap, end.

The scheduler reads :meth:`AttemptOps.head` (or the whole
:meth:`AttemptOps.snapshot`); :meth:`AttemptOps.claim` starts what it planned
under a lease that :meth:`AttemptOps.heartbeat` extends; an attempt ends by
:meth:`AttemptOps.finish`, :meth:`AttemptOps.fail_attempt` (the retry policy of
:mod:`farm.queue.lifecycle`), :meth:`AttemptOps.requeue`, or, when its farmd is
gone, :meth:`AttemptOps.reap` and :meth:`AttemptOps.reclaim`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from farm.errors import FarmError
from farm.queue import endings, head, lifecycle
from farm.queue.devices import of_host
from farm.queue.models import Device, Job, JobState
from farm.queue.ops import JobTransactionOps
from farm.queue.records import AttemptView, Claim, Decision, Failure, Outcome, SnapshotData
from farm.queue.reservations import active_reservations
from farm.queue.scheduler import AGING_STEP_S, Assignment, DeviceView, QueueSnapshot

__all__ = ["AttemptOps"]


class AttemptOps(JobTransactionOps):
    """Attempt operations; mixed into Store (``_tx()``, ``_notify_jobs()``, ``_specs``)."""

    #: Decoded specs by job id, kept across ticks (:class:`farm.queue.head.DecodedSpecs`).
    _specs: head.DecodedSpecs

    def snapshot(self) -> QueueSnapshot:
        """Every queued job and every device, for :func:`farm.queue.scheduler.plan`.

        For ``farmctl``'s wait reasons, which explain every queued job; a tick
        reads only :meth:`head`.
        """
        # Plain column rows, not ORM objects: identity-map bookkeeping was most
        # of the cost of reading 1000 queued jobs.
        with self._tx() as session:
            query = select(*head.COLUMNS).where(Job.state == JobState.QUEUED)
            jobs = [self._specs.job(row) for row in session.execute(query)]
            return QueueSnapshot(jobs=jobs, devices=_device_views(session))

    def head(
        self,
        now: datetime,
        *,
        seed: int = 0,
        kinds: Collection[str] | None = None,
        aging_step_s: float = AGING_STEP_S,
        host: str | None = None,
        device_kinds: Collection[str] | None = None,
    ) -> QueueSnapshot:
        """The queued jobs that settle a plan at ``now``, and every device (of ``host``).

        ``plan(store.head(now, seed=s, kinds=leases.keys()), now, seed=s,
        lease_s_by_kind=leases)`` decides as ``plan(store.snapshot(), ...)``
        does, reading only as many queued jobs as it needs
        (:mod:`farm.queue.head`): a tick's cost does not grow with the queue.

        Args:
            now: the plan's time (aware UTC).
            seed: the seed the plan will be given.
            kinds: the kinds that may start (the plan's ``lease_s_by_kind``
                keys); None: all.
            aging_step_s: seconds of waiting worth one priority point.
            host: plan over this farmd host's devices only (and those no host
                owns, :func:`farm.queue.devices.of_host`): the jobs are
                everyone's, the phones its own, so a job starts on whichever
                host has a fitting free phone. None: every device.
            device_kinds: the device kinds that may take work (the plan's);
                None: all.
        """
        with self._tx() as session:
            return head.read_head(
                session, _device_views(session, host), now, self._specs,
                seed=seed, kinds=kinds, aging_step_s=aging_step_s, device_kinds=device_kinds,
            )

    def claim(
        self, assignments: Sequence[Assignment], now: datetime, *, host: str | None = None
    ) -> list[Claim]:
        """Start the assigned jobs that are still queued on phones still ready.

        An assignment whose job or phones changed since the snapshot is skipped,
        not half-applied; so is one onto a phone that another attempt still
        holds (``phone_holds``: one running attempt per phone, enforced by the
        database whatever a racing state write left in ``devices``).

        Args:
            assignments: from :func:`~farm.queue.scheduler.plan`.
            now: the start time.
            host: the id of the farmd that runs them (``Settings.host_id``),
                stored on each attempt for :meth:`reclaim`.

        Returns:
            The attempts started, one per applied assignment.
        """
        with self._tx() as session:
            claims = [lifecycle.claim_one(session, a, now, host) for a in assignments]
        return [c for c in claims if c is not None]

    def heartbeat(self, attempt_id: int, now: datetime) -> bool:
        """Extend a running attempt's lease to ``now`` plus the lease it was claimed with.

        Returns:
            False if the attempt should stop: it ended (reaped, reported) or its
            job was cancelled. The caller then ends its child process.
        """
        with self._tx() as session:
            return lifecycle.heartbeat(session, attempt_id, now)

    def reap(self, now: datetime) -> list[AttemptView]:
        """End the running attempts whose lease expired before ``now``.

        Each one's job is requeued while attempts remain, else failed with an
        ``AbandonedJob`` reason; its phones go ``unhealthy`` so a health check
        runs before they take work again. farmd calls this at start and on
        every tick.

        Cancelled attempts whose lease ran out with no report from their
        executor (their farmd died) free their held phones, to ``unhealthy``.

        Returns:
            The attempts reaped, as they are now (state ``abandoned``).
        """
        with self._tx() as session:
            return lifecycle.reap(session, now)

    def reclaim(self, host: str, reason: str, now: datetime) -> list[AttemptView]:
        """End at once the attempts a dead farmd of ``host`` left running.

        For a farmd starting on ``host``: its predecessor died (kill -9, power
        cut), so none of its attempts can still report. Each ends
        ``abandoned`` (error kind ``Reclaimed``) without waiting for its lease,
        and its job is queued again without counting the attempt or a
        backoff. Their phones, and those still held by cancelled attempts of
        ``host``, go ``unhealthy``: checked and set up again before new work.
        Attempts of other hosts are left alone. Call it once at start, before
        this farmd claims anything: every running attempt of ``host`` is ended.

        Args:
            host: this farmd's ``Settings.host_id``.
            reason: stored as each attempt's error, e.g. ``"farmd restarted"``.
            now: when.

        Returns:
            The attempts ended, as they are now (state ``abandoned``).
        """
        with self._tx() as session:
            return endings.reclaim(session, host, reason, now)

    def requeue(self, attempt_id: int, reason: str, now: datetime) -> bool:
        """Put a running attempt's job back in the queue without counting the attempt.

        For a clean farmd stop: the attempt is abandoned, its phones are ready
        again, and the job keeps every attempt it had. False if not running.
        """
        with self._tx() as session:
            return lifecycle.requeue(session, attempt_id, reason, now)

    def finish(self, attempt_id: int, outcome: Outcome, now: datetime) -> bool:
        """Commit an attempt's result and mark its job succeeded, exactly once.

        Returns:
            True if this call stored the result; False (and nothing changed) if
            the attempt had already ended, its job was cancelled, or the job
            already has a result.
        """
        try:
            with self._tx() as session:
                self._notify_jobs(session)
                return lifecycle.finish(session, attempt_id, outcome, now)
        except IntegrityError:
            return False  # results.job_id is unique: another attempt won

    def fail_attempt(self, attempt_id: int, error: Failure | FarmError, now: datetime) -> Decision:
        """Record a failed attempt and retry or fail its job by the error's kind.

        ``Retry.NEVER`` fails the job now with the message. ``OTHER_PHONE``
        marks the blamed phones ``unhealthy`` and requeues, excluding them
        (:func:`~farm.queue.scheduler.plan` ignores the exclusion while too few
        other phones are in service); its first fault on each phone costs the
        job no attempt, for up to ``attempts`` phones. ``SAME_LIMIT`` requeues
        after a backoff (:func:`farm.queue.lifecycle.backoff_s`). Both fail
        the job once ``attempts`` are used up.
        """
        failure = error if isinstance(error, Failure) else Failure.from_error(error)
        with self._tx() as session:
            self._notify_jobs(session)
            return lifecycle.fail(session, attempt_id, failure, now)

    def record_snapshot(self, attempt_id: int, snapshot: SnapshotData) -> None:
        """Store a phone's state taken before a measured run of a running attempt."""
        with self._tx() as session:
            lifecycle.add_snapshots(session, attempt_id, [snapshot])


def _device_views(session: Session, host: str | None = None) -> list[DeviceView]:
    """Every known phone (of ``host``, if given) as the scheduler sees it, by serial."""
    reserved = active_reservations(session)
    query = select(Device).order_by(Device.serial)
    if host is not None:
        query = query.where(of_host(host))
    views = []
    for d in session.scalars(query):
        reserved_by, reserved_until = reserved.get(d.serial, (None, None))
        views.append(DeviceView(d.serial, d.state, d.drained, dict(d.facts or {}),
                                d.held_outside, reserved_by, reserved_until, host=d.host,
                                kind=d.kind or "android"))
    return views
