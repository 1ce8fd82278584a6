"""Rolling upgrades on one PostgreSQL: rows a newer farm wrote do not stop an older host.

Rows written by "another version" straight into the tables: a device in a state
this farm does not know (issue 26), a ready device of a kind it does not know
(``hologram``, owned by no host yet, so this host plans over it), a job of a kind
it does not know and a job in a state it does not know (``paused``). This host's
dispatcher must run its job on its own phone only, start and fail nothing it
cannot read, and its API must answer, showing those rows as unknown.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from device_states import put_state
from fastapi.testclient import TestClient

from farm.api.context import ApiContext
from farm.clock import SystemClock, wait_until
from farm.config import Settings
from farm.jobs.local_cluster import LocalCluster
from farm.queue import DeviceState, JobState, Store
from farm.runner import Dispatcher
from farm.serve.app import create_app
from farm.tvm.keys import phone_key
from farm.virtual.testing import AdbServerHandle

pytestmark = pytest.mark.fleet

TINY_GEMM = {"kind": "gemm", "params": {"n": 16, "number": 1, "repeat": 3}}
JOB_DEADLINE_S = 90.0


@pytest.fixture
def pg_url(postgres_base_url: str) -> Iterator[str]:
    """A fresh schema on the test PostgreSQL, dropped afterwards."""
    schema = f"farm_upgrade_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_base_url)
    with admin.begin() as connection:
        connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
    url = sa.engine.make_url(postgres_base_url).update_query_dict(
        {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.begin() as connection:
            connection.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def _write_as_newer(store: Store, raw: sa.Engine, now: datetime) -> tuple[int, int]:
    """A newer farm's rows: the 'parked' phone, the ready hologram, and two jobs of
    priority 9: one of kind 'hologram_bench', one 'paused'; returns those jobs' ids."""
    facts = {"abi": "x86_64", "sdk": 34, "host_runtime": True}
    for name, kind in (("newer-phone", "android"), ("holo", "hologram")):
        store.upsert_device(name, now, facts, kind=kind)
        put_state(store, name, DeviceState.READY, "health check passed", now)
    newer_kind = store.enqueue({**TINY_GEMM, "priority": 9}, now)
    paused = store.enqueue({**TINY_GEMM, "priority": 9}, now)
    with raw.begin() as connection:  # what the newer farm's host writes
        connection.execute(sa.text("UPDATE devices SET state = 'parked', host = 'newer' "
                                   "WHERE serial = 'newer-phone'"))
        connection.execute(sa.text(
            "UPDATE jobs SET kind = 'hologram_bench', spec = CAST(:spec AS json) "
            "WHERE id = :id"), {"spec": '{"kind": "hologram_bench", "params": {}}',
                                "id": newer_kind})
        connection.execute(sa.text("UPDATE jobs SET state = 'paused' WHERE id = :id"),
                           {"id": paused})
    return newer_kind, paused


def test_unknown_state_leaves_dispatch_and_api_running(
    pg_url: str, adb_server: AdbServerHandle, make_fleet, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    """Beside a 'parked' phone, a ready hologram, a job of an unknown kind and a paused job,
    this host runs its job to success on its own phone, starts nothing else, and its API
    lists the phones and the jobs, the unknown ones as unknown."""
    fleet = make_fleet(1)
    cluster = LocalCluster()
    raw = sa.create_engine(pg_url)  # another farm's writes, outside this one's store
    with contextlib.ExitStack() as stack:
        stack.callback(cluster.close)
        stack.callback(raw.dispose)
        store = stack.enter_context(Store(pg_url))
        cluster.start_tracker()
        settings = Settings(data_dir=tmp_path / "data", database_url=pg_url,
                            adb={"port": adb_server.port}, tracker={"port": cluster.port})
        [serial] = fleet.serials
        cluster.add_servers(phone_key(settings.tracker.key, serial))
        now = SystemClock().now()
        facts = {"abi": "x86_64", "sdk": 34, "host_runtime": True}
        store.upsert_device(serial, now, facts)
        put_state(store, serial, DeviceState.READY, "health check passed", now)
        newer_kind, paused = _write_as_newer(store, raw, now)

        job_id = store.enqueue({**TINY_GEMM, "attempts": 1}, now)
        dispatcher = Dispatcher(store, settings, SystemClock())

        def done() -> bool:
            dispatcher.tick()
            view = store.get_job(job_id)
            return view is not None and view.state.ended and not dispatcher.children

        wait_until(done, JOB_DEADLINE_S, "the job ends")
        view = store.get_job(job_id)
        assert view is not None and view.state is JobState.SUCCEEDED
        assert [a.serials for a in store.attempts(job_id)] == [(serial,)]
        unread = store.get_job(newer_kind)  # left for a host that knows its kind
        assert unread is not None and unread.state is JobState.QUEUED
        assert (store.attempts(newer_kind), store.attempts(paused)) == ([], [])
        holo = store.get_device("holo")
        assert holo is not None and holo.state is DeviceState.READY

        token = store.create_token("ops", now, operator=True)
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(create_app(ApiContext(store, settings))) as client:
            answer = client.get("/api/v1/devices", headers=headers)
            jobs = client.get("/api/v1/jobs", headers=headers)
        assert answer.status_code == 200, answer.text
        states = {d["serial"]: d["state"] for d in answer.json()}
        assert states == {serial: "ready", "newer-phone": "unknown", "holo": "ready"}
        assert jobs.status_code == 200, jobs.text
        shown = {out["job"]["id"]: (out["job"]["state"], out["job"]["unknown_state"])
                 for out in jobs.json()}
        assert shown[paused] == ("unknown", "paused")
        assert shown[newer_kind] == ("queued", None)
        with raw.begin() as connection:  # this host wrote nothing over it
            stored = connection.execute(sa.text(
                "SELECT state FROM devices WHERE serial = 'newer-phone'")).scalar_one()
            stored_job = connection.execute(sa.text(
                "SELECT state FROM jobs WHERE id = :id"), {"id": paused}).scalar_one()
        assert (stored, stored_job) == ("parked", "paused")
