"""Phones held outside farm: the store's compare-and-set, the scheduler, the claim and the sweep."""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace

import psutil
from device_states import put_state
from queue_helpers import ARM64, T0, add_ready, gemm_spec, plan

from farm.clock import FakeClock
from farm.fleet.held import HELD_CONFIRM_S, HeldWatch, held_servers, session_peer
from farm.queue import DeviceState, Store
from farm.queue.scheduler import DeviceView, QueuedJob, QueueSnapshot
from farm.queue.spec import DeviceSelection
from farm.queue.waiting import wait_reasons
from farm.tvm.tracker import QueueInfo, ServerInfo, TrackerSummary

HELD = "held outside farm by a session from 127.0.0.1:40112"
SERVER = ServerInfo("android-p1", "127.0.0.1", 41000)


def in_use(*servers: ServerInfo) -> TrackerSummary:
    """A summary listing ``servers`` with nothing free in their queues."""
    return TrackerSummary(servers, tuple(QueueInfo(s.key, 0, 0) for s in servers))


def free(*servers: ServerInfo) -> TrackerSummary:
    """A summary listing ``servers``, each offering itself."""
    return TrackerSummary(servers, tuple(QueueInfo(s.key, 1, 0) for s in servers))


class TestMarkHeldOutside:
    def test_sets_and_clears_with_an_event_each(self, store: Store) -> None:
        """Setting and clearing the reason each leave an event row; the state stays."""
        add_ready(store, "p1")
        assert store.mark_held_outside("p1", HELD, T0, expect_held=None)
        assert store.get_device("p1").held_outside == HELD  # type: ignore[union-attr]
        assert store.mark_held_outside("p1", None, T0, expect_held=HELD)
        record = store.get_device("p1")
        assert record is not None and record.held_outside is None
        assert record.state is DeviceState.READY
        reasons = [e.reason for e in store.device_events("p1", limit=2)]
        assert reasons == [f"no longer {HELD}", HELD]

    def test_refused_on_a_phone_a_claim_took(self, store: Store) -> None:
        """A phone claimed since the caller's read is not marked: the session was farm's."""
        add_ready(store, "p1")
        store.enqueue(gemm_spec(), T0)
        assert store.claim(plan(store.snapshot(), T0), T0)
        assert not store.mark_held_outside("p1", HELD, T0, expect_held=None)
        assert store.get_device("p1").held_outside is None  # type: ignore[union-attr]

    def test_refused_when_the_reason_changed_since_the_read(self, store: Store) -> None:
        """Clearing a reason the caller did not read changes nothing."""
        add_ready(store, "p1")
        assert store.mark_held_outside("p1", HELD, T0, expect_held=None)
        assert not store.mark_held_outside("p1", None, T0, expect_held="something else")
        assert store.get_device("p1").held_outside == HELD  # type: ignore[union-attr]

    def test_a_claim_skips_a_held_phone(self, store: Store) -> None:
        """Even a plan made before the mark cannot put a job on a held phone."""
        add_ready(store, "p1")
        store.enqueue(gemm_spec(), T0)
        stale = plan(store.snapshot(), T0)
        assert stale
        store.mark_held_outside("p1", HELD, T0, expect_held=None)
        assert store.claim(stale, T0) == []


class TestScheduler:
    def test_held_phone_gets_no_work_and_the_job_says_why(self) -> None:
        """A job whose only phone is held outside waits with the holder's address."""
        job = QueuedJob(1, "gemm", 0, T0, DeviceSelection())
        snapshot = QueueSnapshot([job], [DeviceView("p1", DeviceState.READY, facts=ARM64,
                                                    held_outside=HELD)])
        assert plan(snapshot, T0) == []
        assert wait_reasons(snapshot, T0) == {1: f"the only match is {HELD}"}

    def test_the_job_goes_to_a_phone_that_is_not_held(self) -> None:
        """With another phone free, the job runs there."""
        job = QueuedJob(1, "gemm", 0, T0, DeviceSelection())
        snapshot = QueueSnapshot([job], [
            DeviceView("p1", DeviceState.READY, facts=ARM64, held_outside=HELD),
            DeviceView("p2", DeviceState.READY, facts=ARM64),
        ])
        assert [a.serials for a in plan(snapshot, T0)] == [("p2",)]

    def test_snapshot_carries_the_mark(self, store: Store) -> None:
        """Store.snapshot gives the scheduler each phone's held_outside."""
        add_ready(store, "p1")
        store.mark_held_outside("p1", HELD, T0, expect_held=None)
        assert [d.held_outside for d in store.snapshot().devices] == [HELD]


class TestHeldServers:
    def test_a_listed_server_with_nothing_free_is_in_use(self) -> None:
        """In use: listed in server_info, free 0 in its key's queue."""
        idle = ServerInfo("android-p2", "127.0.0.1", 41001)
        summary = TrackerSummary((SERVER, idle), (QueueInfo(SERVER.key, 0, 0),
                                                  QueueInfo(idle.key, 1, 0)))
        assert held_servers(summary) == {SERVER.key: SERVER}

    def test_session_peer_is_the_client_connected_to_the_server(self) -> None:
        """The client is the local end of a connection to the server's address."""
        addr = namedtuple("addr", "ip port")  # psutil's shape
        conns = [
            SimpleNamespace(status=psutil.CONN_LISTEN, laddr=addr("127.0.0.1", 41000), raddr=()),
            SimpleNamespace(status=psutil.CONN_ESTABLISHED, laddr=addr("127.0.0.1", 41000),
                            raddr=addr("127.0.0.1", 40112)),
            SimpleNamespace(status=psutil.CONN_ESTABLISHED, laddr=addr("127.0.0.1", 40112),
                            raddr=addr("127.0.0.1", 41000)),
        ]
        assert session_peer(SERVER, conns) == "127.0.0.1:40112"  # type: ignore[arg-type]
        assert session_peer(SERVER, conns[:2]) is None  # type: ignore[arg-type]


class TestHeldWatch:
    def watch(self, store: Store, peer: str | None = "127.0.0.1:40112"
              ) -> tuple[HeldWatch, FakeClock, list[int]]:
        freed: list[int] = []
        clock = FakeClock(T0)
        watch = HeldWatch(store, clock, on_free=lambda: freed.append(1),
                          peers=lambda _server: peer)
        return watch, clock, freed

    def update(self, watch: HeldWatch, store: Store, summary: TrackerSummary,
               probing: bool = False) -> set[str]:
        return watch.update(store.list_devices(), {"p1": SERVER.key}, summary,
                            lambda _serial: probing)

    def test_two_sightings_apart_mark_the_phone(self, store: Store) -> None:
        """One sighting is not enough (farm's own session may just have ended); two are."""
        add_ready(store, "p1")
        watch, clock, _ = self.watch(store)
        assert self.update(watch, store, in_use(SERVER)) == set()
        clock.advance(HELD_CONFIRM_S)
        assert self.update(watch, store, in_use(SERVER)) == {"p1"}
        assert store.get_device("p1").held_outside == HELD  # type: ignore[union-attr]

    def test_a_usb_only_server_nobody_is_connected_to_is_not_held(self, store: Store) -> None:
        """A taken ticket with no client on this host's forward is a frozen app, not a session."""
        add_ready(store, "p1")
        watch, clock, _ = self.watch(store, peer=None)
        for _ in range(3):
            assert self.update(watch, store, in_use(SERVER)) == set()
            clock.advance(HELD_CONFIRM_S)

    def test_an_unhealthy_phone_is_not_held(self, store: Store) -> None:
        """Only an idle ready phone can be held outside; the ladder owns the others."""
        add_ready(store, "p1")
        put_state(store, "p1", DeviceState.UNHEALTHY, "probe failed", T0)
        watch, clock, _ = self.watch(store)
        for _ in range(3):
            assert self.update(watch, store, in_use(SERVER)) == set()
            clock.advance(HELD_CONFIRM_S)

    def test_a_free_sighting_in_between_starts_over(self, store: Store) -> None:
        """A server free again between two sightings is not held."""
        add_ready(store, "p1")
        watch, clock, _ = self.watch(store)
        self.update(watch, store, in_use(SERVER))
        clock.advance(HELD_CONFIRM_S)
        self.update(watch, store, free(SERVER))
        assert self.update(watch, store, in_use(SERVER)) == set()

    def test_farms_own_probe_or_attempt_is_not_outside(self, store: Store) -> None:
        """A phone farm probes, or a busy one, is never marked."""
        add_ready(store, "p1")
        watch, clock, _ = self.watch(store)
        for _ in range(3):
            assert self.update(watch, store, in_use(SERVER), probing=True) == set()
            clock.advance(HELD_CONFIRM_S)
        store.enqueue(gemm_spec(), T0)
        assert store.claim(plan(store.snapshot(), T0), T0)
        for _ in range(3):
            assert self.update(watch, store, in_use(SERVER)) == set()
            clock.advance(HELD_CONFIRM_S)
        assert store.get_device("p1").held_outside is None  # type: ignore[union-attr]

    def test_cleared_and_announced_when_the_session_ends(self, store: Store) -> None:
        """Once the server is free again the mark goes and the dispatcher is woken."""
        add_ready(store, "p1")
        watch, clock, freed = self.watch(store)
        self.update(watch, store, in_use(SERVER))
        clock.advance(HELD_CONFIRM_S)
        self.update(watch, store, in_use(SERVER))
        assert self.update(watch, store, free(SERVER)) == set()
        assert store.get_device("p1").held_outside is None  # type: ignore[union-attr]
        assert freed == [1]
