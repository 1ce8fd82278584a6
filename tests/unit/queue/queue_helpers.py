"""Shared values and helpers of the queue tests (imported by name; no __init__.py here)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from device_states import put_state

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
