"""Tests of Store's host half (farm.queue.hosts): liveness, device ownership, per-host plans."""

from __future__ import annotations

from datetime import timedelta

from device_states import put_state
from queue_helpers import ARM64, T0, gemm_spec, plan

import farm
from farm.queue import Assignment, DeviceState, Store
from farm.queue.db import head_revision
from farm.queue.hosts import HostRecord, dead_hosts
from farm.queue.waiting import wait_reasons

DEAD_AFTER_S = 60.0
LATER = T0 + timedelta(seconds=DEAD_AFTER_S + 1)


def own_ready(store: Store, host: str, *serials: str) -> None:
    """Phones adopted by ``host`` and made ready at T0."""
    for serial in serials:
        assert store.adopt_device(serial, host, T0, dead_after_s=DEAD_AFTER_S) is not None
        store.upsert_device(serial, T0, ARM64)
        put_state(store, serial, DeviceState.READY, "provisioned", T0)


class TestHostRows:
    """register_host, host_heartbeat, list_hosts and liveness."""

    def test_register_then_list(self, store: Store) -> None:
        """A registered host is listed with its tracker address, started and beating now."""
        store.register_host("a", "10.0.0.1", 9190, T0, {"adb_port": 5037})
        [host] = store.list_hosts()
        assert host == HostRecord("a", T0, T0, "10.0.0.1", 9190, {"adb_port": 5037},
                                  head_revision(), farm.__version__)

    def test_register_again_restarts(self, store: Store) -> None:
        """Registering an existing host (a restart) updates its row instead of failing."""
        store.register_host("a", "10.0.0.1", 9190, T0)
        store.register_host("a", "10.0.0.2", 9191, LATER)
        [host] = store.list_hosts()
        assert (host.started_at, host.tracker_host, host.tracker_port) == (LATER, "10.0.0.2", 9191)

    def test_heartbeat_moves_the_stamp(self, store: Store) -> None:
        """A heartbeat stamps heartbeat_at and leaves started_at alone."""
        store.register_host("a", "h", 9190, T0)
        assert store.host_heartbeat("a", LATER)
        [host] = store.list_hosts()
        assert (host.started_at, host.heartbeat_at) == (T0, LATER)

    def test_heartbeat_of_unknown_host(self, store: Store) -> None:
        """A heartbeat of a host with no row says so (farmd registers again)."""
        assert not store.host_heartbeat("ghost", T0)

    def test_dead_after_silence(self, store: Store) -> None:
        """A host is dead once its heartbeat is older than dead_after_s."""
        store.register_host("a", "h", 9190, T0)
        store.register_host("b", "h", 9191, LATER)
        assert store.dead_host_ids(LATER, DEAD_AFTER_S) == {"a"}
        assert dead_hosts(store.list_hosts(), T0, DEAD_AFTER_S) == frozenset()


class TestAdoptDevice:
    """A device belongs to the host whose adb server sees it."""

    def test_new_device_is_owned(self, store: Store) -> None:
        """A device first seen by a host starts discovered, owned by it."""
        record = store.adopt_device("s1", "a", T0, dead_after_s=DEAD_AFTER_S)
        assert record is not None and (record.host, record.state) == ("a", DeviceState.DISCOVERED)

    def test_device_of_no_host_is_adopted(self, store: Store) -> None:
        """A device no host owns (an older database's row) is adopted as it is."""
        store.upsert_device("s1", T0, ARM64)
        put_state(store, "s1", DeviceState.READY, "provisioned", T0)
        record = store.adopt_device("s1", "a", T0, dead_after_s=DEAD_AFTER_S)
        assert record is not None and (record.host, record.state) == ("a", DeviceState.READY)

    def test_live_owner_keeps_its_device(self, store: Store) -> None:
        """A ready device of a live host is left to it: the other host gets None."""
        store.register_host("a", "h", 9190, T0)
        own_ready(store, "a", "s1")
        assert store.adopt_device("s1", "b", T0, dead_after_s=DEAD_AFTER_S) is None
        record = store.get_device("s1")
        assert record is not None and (record.host, record.state) == ("a", DeviceState.READY)

    def test_offline_device_moves_host(self, store: Store) -> None:
        """A device its live owner sees offline is taken by the host that now sees it."""
        store.register_host("a", "h", 9190, T0)
        own_ready(store, "a", "s1")
        put_state(store, "s1", DeviceState.OFFLINE, "unplugged", T0)
        record = store.adopt_device("s1", "b", T0, dead_after_s=DEAD_AFTER_S)
        assert record is not None and (record.host, record.state) == ("b", DeviceState.OFFLINE)
        assert "taken over by host b from a (offline there)" in store.device_events("s1")[0].reason

    def test_dead_owner_loses_its_device(self, store: Store) -> None:
        """A ready device of a dead host is taken over and set up again (discovered)."""
        store.register_host("a", "h", 9190, T0)
        own_ready(store, "a", "s1")
        record = store.adopt_device("s1", "b", LATER, dead_after_s=DEAD_AFTER_S)
        assert record is not None and (record.host, record.state) == ("b", DeviceState.DISCOVERED)

    def test_busy_device_of_dead_owner_stays_busy(self, store: Store) -> None:
        """A busy device changes owner but keeps its attempt until the lease runs out."""
        store.register_host("a", "h", 9190, T0)
        own_ready(store, "a", "s1")
        job_id = store.enqueue(gemm_spec(), T0)
        store.claim([Assignment(job_id, ("s1",), 60.0)], T0, host="a")
        record = store.adopt_device("s1", "b", LATER, dead_after_s=DEAD_AFTER_S)
        assert record is not None and (record.host, record.state) == ("b", DeviceState.BUSY)


class TestPerHostDispatch:
    """Each host plans and claims over its own devices only."""

    def test_list_devices_of_a_host(self, store: Store) -> None:
        """list_devices(host=...) gives the host's devices and those no host owns."""
        own_ready(store, "a", "a1")
        own_ready(store, "b", "b1")
        store.upsert_device("loose", T0)
        assert [d.serial for d in store.list_devices(host="a")] == ["a1", "loose"]
        assert [d.serial for d in store.list_devices()] == ["a1", "b1", "loose"]

    def test_head_plans_over_own_phones(self, store: Store) -> None:
        """A job pinned to host b's phone is planned by b, never by a."""
        own_ready(store, "a", "a1")
        own_ready(store, "b", "b1")
        job_id = store.enqueue(gemm_spec(devices={"serials": ["b1"]}), T0)
        assert plan(store.head(T0, host="a"), T0) == []
        [assignment] = plan(store.head(T0, host="b"), T0)
        assert (assignment.job_id, assignment.serials) == (job_id, ("b1",))

    def test_claim_refuses_another_hosts_phone(self, store: Store) -> None:
        """A claim by host a onto host b's phone changes nothing."""
        own_ready(store, "b", "b1")
        job_id = store.enqueue(gemm_spec(), T0)
        assert store.claim([Assignment(job_id, ("b1",), 60.0)], T0, host="a") == []
        [claim] = store.claim([Assignment(job_id, ("b1",), 60.0)], T0, host="b")
        assert claim.attempt.host == "b"


class TestWaitReasonsAcrossHosts:
    """farmctl's wait reasons decide per host, as each farmd's dispatcher does."""

    def test_phones_split_over_hosts_do_not_make_a_pair(self, store: Store) -> None:
        """A 2-phone job with one fitting phone per host waits, and says why."""
        own_ready(store, "a", "a1")
        own_ready(store, "b", "b1")
        job_id = store.enqueue(gemm_spec(devices={"count": 2}), T0)
        reasons = wait_reasons(store.snapshot(), T0)
        assert reasons[job_id] == (
            "needs 2 phones on one host, at most 1 of the 2 that match are on one host")

    def test_pair_on_one_host_starts(self, store: Store) -> None:
        """A 2-phone job with both fitting phones on one host starts at the next tick."""
        own_ready(store, "a", "a1", "a2")
        own_ready(store, "b", "b1")
        job_id = store.enqueue(gemm_spec(devices={"count": 2}), T0)
        assert wait_reasons(store.snapshot(), T0)[job_id] == "starts at the next tick"

    def test_dead_hosts_phone_is_unreachable(self, store: Store) -> None:
        """A job pinned to a dead host's ready phone waits on an unreachable phone."""
        own_ready(store, "b", "b1")
        job_id = store.enqueue(gemm_spec(devices={"serials": ["b1"]}), T0)
        reasons = wait_reasons(store.snapshot(), T0, dead_hosts={"b"})
        assert reasons[job_id] == "the only match is unreachable"
