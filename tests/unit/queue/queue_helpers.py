"""Shared values and helpers of the queue tests (imported by name; no __init__.py here)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from device_states import put_state

from farm.clock import wait_until
from farm.config import JobSettings
from farm.kinds import LeaseByKind
from farm.queue import Assignment, DeviceState, QueueSnapshot, Store, scheduler
from farm.queue.models import Device

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
ARM64 = {
    "abi": "arm64-v8a",
    "abis": ["arm64-v8a", "armeabi-v7a"],
    "soc": "SM8150",
    "sdk": 30,
    "gpu": "Adreno (TM) 640",
}


#: Seconds of lease per job kind: the config's defaults (jobs.lease_s, jobs.tune_lease_s).
#: The leases farmd uses: each kind's from the config's defaults (farm.kinds).
LEASES: Mapping[str, float] = LeaseByKind(JobSettings())


def plan(snapshot: QueueSnapshot, now: datetime, **kwargs: Any) -> list[Assignment]:
    """:func:`farm.queue.scheduler.plan` with the leases of :data:`LEASES`."""
    return scheduler.plan(snapshot, now, lease_s_by_kind=LEASES, **kwargs)


def add_ready(store: Store, *serials: str, facts: dict | None = None) -> None:
    """Register phones and make them ready at T0."""
    for serial in serials:
        store.upsert_device(serial, T0, ARM64 if facts is None else facts)
        put_state(store, serial, DeviceState.READY, "provisioned", T0)


def write_ready_unchecked(engine: sa.Engine, serial: str, now: datetime) -> None:
    """Play the old fleet race: write ``ready`` over whatever the phone is, checking nothing.

    Plain SQLAlchemy on the ``devices`` table, on purpose: the store has no
    unconditional write any more (it moves phones by compare-and-set only), but
    the tests show the phone holds keep a second attempt off a phone even so.
    """
    with engine.begin() as connection:
        connection.execute(
            sa.update(Device)
            .where(Device.serial == serial)
            .values(state=DeviceState.READY, attempt_id=None, state_changed_at=now)
        )


def gemm_spec(**overrides: object) -> dict:
    """A small valid gemm spec, with top-level fields overridden."""
    spec: dict = {"kind": "gemm", "params": {"n": 64}}
    spec.update(overrides)
    return spec


@contextlib.contextmanager
def held_phone_select(url: str) -> Iterator[Callable[[], None]]:
    """Hold every claim's ``SELECT ... FROM devices ... FOR UPDATE SKIP LOCKED`` for 1.5 s.

    The hold (``pg_sleep`` added to its WHERE) comes after the statement's
    snapshot and before its row locks: what commits meanwhile is what a claim
    racing it would meet. Yields ``wait_held()``, which returns once such a
    select of this call is running on the server (``pg_stat_activity``; a
    marker of its own, as another test file may hold selects on the same
    server at once). PostgreSQL only.
    """
    hold_sql = f"'held-{uuid.uuid4().hex}' IS NOT NULL AND pg_sleep(1.5) IS NOT NULL"

    def hold(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any,
             _many: bool) -> tuple[str, Any]:
        if "FROM devices" in statement and "FOR UPDATE SKIP LOCKED" in statement:
            statement = statement.replace(" ORDER BY devices.serial FOR UPDATE",
                                          f" AND {hold_sql} ORDER BY devices.serial FOR UPDATE")
        return statement, parameters

    watcher = sa.create_engine(url)

    def held() -> bool:
        with watcher.connect() as connection:
            return bool(connection.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND "
                "strpos(query, :marker) > 0 AND pid <> pg_backend_pid()"),
                {"marker": hold_sql}).scalar())

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", hold, retval=True)
    try:
        yield lambda: wait_until(held, 30.0, "a claim's select of phones held")
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", hold)
        watcher.dispose()
