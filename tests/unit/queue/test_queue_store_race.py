"""Fleet writes raced against claims on the real store: never two running attempts on one phone.

Two ways, each on SQLite and, when ``TEST_POSTGRES_URL`` is set, PostgreSQL:

* a hypothesis state machine interleaves, one step at a time, everything that
  writes the queue: claims from plans made on stale snapshots (two farmd hosts),
  fleet moves from stale reads, the old unconditional state write, heartbeats,
  finish, fail of each retry kind, reap after jumps in time, requeue, reclaim
  and cancel; the queue's rules (:mod:`queue_integrity`) are read from the
  tables after every step;
* threads: two farmd stores claiming and ending attempts, a fleet store moving
  phones from what it read, and a canceller, all at once on one database.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)
from queue_helpers import ARM64, T0, gemm_spec, plan, write_ready_unchecked
from queue_integrity import Checker

from farm.clock import wait_until
from farm.errors import CompileError, JobTimeout, SessionError
from farm.queue import Assignment, Claim, DeviceRecord, DeviceState, Outcome, Store
from farm.queue.db import create_engine
from farm.queue.models import Base

SERIALS = ("p0", "p1")  # few phones: more collisions
HOSTS = ("h1", "h2")
OK = Outcome(summary={"median_s": 0.002}, samples=[0.002])
#: Where the fleet may move a phone (never busy: only a claim makes a phone busy).
FLEET_STATES = (
    DeviceState.READY,
    DeviceState.UNHEALTHY,
    DeviceState.OFFLINE,
    DeviceState.COOLING,
    DeviceState.DISCOVERED,
)
RACE_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def wipe(checker: Checker) -> None:
    """Empty every table (children first), for a fresh example on the same schema."""
    with checker.engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            connection.execute(table.delete())


def race_machine(store: Store, checker: Checker) -> type[RuleBasedStateMachine]:
    """The state machine class, bound to one open store and its checker."""

    class QueueRace(RuleBasedStateMachine):
        """Every writer of the queue, interleaved; the rules hold after each step."""

        jobs = Bundle("jobs")
        attempts = Bundle("attempts")
        plans = Bundle("plans")
        reads = Bundle("reads")

        def __init__(self) -> None:
            super().__init__()
            wipe(checker)
            self.now = T0
            for serial in SERIALS:
                store.upsert_device(serial, T0, ARM64)
                store.move_device(serial, DeviceState.READY, "provisioned", T0,
                                  expect_state=DeviceState.DISCOVERED)

        @initialize(target=jobs)
        def queue_some(self) -> object:
            """Work for every example (hypothesis may leave ``enqueue`` out of one)."""
            return multiple(*(store.enqueue(gemm_spec(attempts=2, devices={"count": count}),
                                            self.now) for count in (1, 1, 2)))

        @rule(target=jobs, count=st.integers(1, 2), attempts=st.integers(1, 3))
        def enqueue(self, count: int, attempts: int) -> int:
            spec = gemm_spec(attempts=attempts, devices={"count": count})
            return store.enqueue(spec, self.now)

        @rule(target=plans)
        def take_plan(self) -> list[Assignment]:
            return plan(store.snapshot(), self.now)

        @rule(target=attempts, host=st.sampled_from(HOSTS))
        def tick(self, host: str) -> object:
            """A dispatcher tick: plan on a fresh snapshot and claim."""
            claims = store.claim(plan(store.snapshot(), self.now), self.now, host=host)
            return multiple(*(c.attempt.id for c in claims))

        @rule(target=attempts, assignments=plans, host=st.sampled_from(HOSTS))
        def claim(self, assignments: list[Assignment], host: str) -> object:
            """A claim of a plan made earlier: stale by now."""
            claims = store.claim(assignments, self.now, host=host)
            return multiple(*(c.attempt.id for c in claims))

        @rule(target=reads, serial=st.sampled_from(SERIALS))
        def read(self, serial: str) -> DeviceRecord | None:
            return store.get_device(serial)

        @rule(read=reads, to_state=st.sampled_from(FLEET_STATES))
        def fleet_move(self, read: DeviceRecord, to_state: DeviceState) -> None:
            store.move_device(read.serial, to_state, "sweep", self.now,
                              expect_state=read.state, expect_attempt=read.attempt_id)

        @rule(serial=st.sampled_from(SERIALS))
        def unconditional_write(self, serial: str) -> None:
            """The old fleet race: a sweep judged the phone fine and wrote ready over busy."""
            write_ready_unchecked(checker.engine, serial, self.now)  # plain SQL: see its doc

        @rule(attempt=attempts)
        def heartbeat(self, attempt: int) -> None:
            store.heartbeat(attempt, self.now)

        @rule(attempt=attempts)
        def finish(self, attempt: int) -> None:
            store.finish(attempt, OK, self.now)

        @rule(attempt=attempts, error=st.sampled_from(["phone", "timeout", "user"]))
        def fail(self, attempt: int, error: str) -> None:
            errors = {
                "phone": SessionError(SERIALS[0], "dropped"),
                "timeout": JobTimeout(0, 600),
                "user": CompileError("gemm_64", "no such op"),
            }
            store.fail_attempt(attempt, errors[error], self.now)

        @rule(seconds=st.sampled_from([1, 30, 130]))
        def advance(self, seconds: int) -> None:
            self.now += timedelta(seconds=seconds)

        @rule()
        def reap(self) -> None:
            store.reap(self.now)

        @rule(attempt=attempts)
        def requeue(self, attempt: int) -> None:
            store.requeue(attempt, "farmd stopping", self.now)

        @rule(host=st.sampled_from(HOSTS))
        def reclaim(self, host: str) -> None:
            store.reclaim(host, "farmd restarted", self.now)

        @rule(job=jobs)
        def cancel(self, job: int) -> None:
            store.cancel(job, self.now)

        @invariant()
        def sound(self) -> None:
            assert checker.violations() == []

    return QueueRace


class TestInterleavings:
    """Every interleaving hypothesis finds keeps the queue's rules."""

    def test_state_machine(self, store_url: str) -> None:
        """Stale claims, stale fleet moves and every ending never break a rule."""
        checker = Checker(store_url)
        try:
            with Store(store_url) as store:
                run_state_machine_as_test(race_machine(store, checker), settings=RACE_SETTINGS)
        finally:
            checker.close()


class Writers:
    """The writers of the thread race; what the farmds run where is shared under one lock."""

    def __init__(self, store_url: str, phones: tuple[str, ...], claims: int) -> None:
        self.store_url = store_url
        self.phones = phones
        self.claims = claims
        self.lock = threading.Lock()
        self.in_use: dict[str, int] = {}  # serial -> the attempt a farmd runs on it
        self.broken: list[str] = []
        self.claimed: list[int] = []  # job ids, in the order their attempts started
        self.enough = threading.Event()  # the farmds stop ticking
        self.done = threading.Event()  # the fleet and the canceller stop
        self.failures: list[BaseException] = []

    def run(self, deadline_s: float) -> None:
        """Two farmds until they made ``claims`` claims, a fleet and a canceller meanwhile.

        The farmds tick until the count is reached (or ``deadline_s`` passed),
        not a fixed number of times: how many ticks find a phone ready depends
        on how the threads are scheduled, which a loaded machine changes (40
        ticks each made from 6 to 44 claims).
        """
        farmds = [self.thread(self.farmd, host) for host in HOSTS]
        others = [self.thread(self.fleet), self.thread(self.canceller)]
        for thread in farmds + others:
            thread.start()
        wait_until(lambda: self.failures or self.claimed_count() >= self.claims, deadline_s)
        self.enough.set()
        for thread in farmds:
            thread.join(timeout=300)
        self.done.set()
        for thread in others:
            thread.join(timeout=60)

    def claimed_count(self) -> int:
        with self.lock:
            return len(self.claimed)

    def thread(self, target: Callable[..., None], *args: str) -> threading.Thread:
        def run() -> None:
            try:
                target(*args)
            except BaseException as exc:  # noqa: BLE001 - the test reports it, not the thread
                self.failures.append(exc)
        return threading.Thread(target=run)

    def farmd(self, host: str) -> None:
        rng = random.Random(host)  # noqa: S311 - seeded: a repeatable race, no secret
        mine: list[Claim] = []
        with Store(self.store_url) as own:
            tick = 0
            while not self.enough.is_set():
                tick += 1
                for claim in own.claim(plan(own.snapshot(), T0, seed=tick), T0, host=host):
                    with self.lock:
                        self.claimed.append(claim.job.id)
                        for serial in claim.attempt.serials:
                            if serial in self.in_use:
                                self.broken.append(f"{serial}: {self.in_use[serial]} and "
                                                   f"{claim.attempt.id}")
                            self.in_use[serial] = claim.attempt.id
                    mine.append(claim)
                while mine and rng.random() < 0.7:
                    self.end(own, mine.pop(rng.randrange(len(mine))), rng)
            while mine:
                self.end(own, mine.pop(), rng)

    def end(self, own: Store, claim: Claim, rng: random.Random) -> None:
        with self.lock:  # forget it before the store frees the phone for another claim
            for serial in claim.attempt.serials:
                if self.in_use.get(serial) == claim.attempt.id:
                    del self.in_use[serial]
        if rng.random() < 0.5:
            own.finish(claim.attempt.id, OK, T0)
        else:
            own.fail_attempt(claim.attempt.id, SessionError(claim.attempt.serials[0], "x"), T0)

    def fleet(self) -> None:
        rng = random.Random("fleet")  # noqa: S311 - seeded: a repeatable race, no secret
        old_writer = create_engine(self.store_url)  # the old unconditional write, in plain SQL
        try:
            with Store(self.store_url) as own:
                while not self.done.is_set():
                    read = own.get_device(rng.choice(self.phones))
                    assert read is not None
                    to_state = {
                        DeviceState.BUSY: DeviceState.OFFLINE,
                        DeviceState.READY: rng.choice([DeviceState.READY, DeviceState.UNHEALTHY]),
                    }.get(read.state, DeviceState.READY)
                    own.move_device(read.serial, to_state, "sweep", T0,
                                    expect_state=read.state, expect_attempt=read.attempt_id)
                    if rng.random() < 0.1:
                        write_ready_unchecked(old_writer, read.serial, T0)
        finally:
            old_writer.dispose()

    def canceller(self) -> None:
        rng = random.Random("cancel")  # noqa: S311 - seeded: a repeatable race, no secret
        with Store(self.store_url) as own:
            while not self.done.wait(0.05):
                with self.lock:
                    started = self.claimed[-6:]  # jobs whose attempts are likely running
                if started and rng.random() < 0.3:
                    own.cancel(rng.choice(started), T0)


class TestThreads:
    """Writers on their own connections, at once."""

    PHONES = tuple(f"t{i}" for i in range(6))
    CLAIMS = 30  # enough claims to have raced: 40 fixed ticks made 11 to 44 here
    DEADLINE_S = 120.0

    def test_concurrent_claims_and_fleet_writes(self, store_url: str) -> None:
        """Two farmd, a fleet and a canceller at once: no phone is ever claimed twice."""
        with Store(store_url) as setup:
            for serial in self.PHONES:
                setup.upsert_device(serial, T0, ARM64)
                setup.move_device(serial, DeviceState.READY, "provisioned", T0,
                                  expect_state=DeviceState.DISCOVERED)
            for i in range(120):
                setup.enqueue(gemm_spec(devices={"count": 1 + i % 2}), T0)
        writers = Writers(store_url, self.PHONES, self.CLAIMS)
        writers.run(self.DEADLINE_S)
        assert writers.failures == [], writers.failures
        assert writers.broken == [], writers.broken
        claims = len(writers.claimed)
        assert claims >= self.CLAIMS, (
            f"only {claims} claims in {self.DEADLINE_S:.0f} s: too few to have raced anything")
        checker = Checker(store_url)
        try:
            assert checker.violations() == []
        finally:
            checker.close()
