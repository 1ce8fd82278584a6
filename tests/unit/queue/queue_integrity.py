"""The queue's integrity rules, read straight from the tables (imported by name by the tests).

One consistent read (SQLite: one ``BEGIN IMMEDIATE`` transaction; PostgreSQL:
``REPEATABLE READ``) of devices, holds, attempts and jobs, checked against:

* a phone is in at most one running attempt;
* a busy phone has a hold for its ``attempt_id``; a phone that is not busy has
  no ``attempt_id``;
* a hold belongs to a running attempt, or to a cancelled one whose executor
  has not reported yet; a running attempt holds each of its phones;
* a job has at most one running attempt, and has one exactly while running;
* ``0 <= attempts_made <= attempts_max``.
"""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa

from farm.queue.db import create_engine
from farm.queue.models import (
    Attempt,
    AttemptState,
    Device,
    DeviceState,
    Job,
    JobState,
    PhoneHold,
)

__all__ = ["Checker"]


class Checker:
    """Reads a queue database on its own connection and lists broken rules."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)

    def close(self) -> None:
        """Close its connections."""
        self.engine.dispose()

    def violations(self) -> list[str]:
        """Every broken rule, as a sentence; ``[]`` when the queue is sound."""
        options = {} if self.engine.dialect.name == "sqlite" else {
            "isolation_level": "REPEATABLE READ"
        }
        with (
            self.engine.connect().execution_options(**options) as connection,
            connection.begin(),
        ):
            devices = connection.execute(
                sa.select(Device.serial, Device.state, Device.attempt_id)
            ).all()
            holds = dict(
                connection.execute(sa.select(PhoneHold.serial, PhoneHold.attempt_id)).all()
            )
            attempts = connection.execute(
                sa.select(Attempt.id, Attempt.job_id, Attempt.state, Attempt.serials)
            ).all()
            jobs = connection.execute(
                sa.select(Job.id, Job.state, Job.attempts_made, Job.attempts_max)
            ).all()
        return _check(devices, holds, attempts, jobs)


def _check(
    devices: list[sa.Row], holds: dict[str, int], attempts: list[sa.Row], jobs: list[sa.Row]
) -> list[str]:
    return [*_phone_rules(devices, holds, attempts), *_job_rules(attempts, jobs)]


def _phone_rules(
    devices: list[sa.Row], holds: dict[str, int], attempts: list[sa.Row]
) -> list[str]:
    """One running attempt per phone, a hold for each, and busy exactly while held."""
    found: list[str] = []
    state_of = {a.id: a.state for a in attempts}
    running_on: dict[str, int] = {}
    for a in attempts:
        if a.state is not AttemptState.RUNNING:
            continue
        for serial in a.serials:
            if serial in running_on:
                found.append(f"{serial} in running attempts {running_on[serial]} and {a.id}")
            running_on[serial] = a.id
            if holds.get(serial) != a.id:
                found.append(f"running attempt {a.id} does not hold {serial}")
    for d in devices:
        held_by = holds.get(d.serial)
        if d.state is DeviceState.BUSY and (d.attempt_id is None or held_by != d.attempt_id):
            found.append(f"{d.serial} busy with {d.attempt_id} but held by {holds.get(d.serial)}")
        if d.state is not DeviceState.BUSY and d.attempt_id is not None:
            found.append(f"{d.serial} is {d.state.value} with attempt {d.attempt_id}")
    for serial, attempt_id in holds.items():
        if state_of.get(attempt_id) not in (AttemptState.RUNNING, AttemptState.CANCELLED):
            found.append(f"{serial} held by attempt {attempt_id}, {state_of.get(attempt_id)}")
    return found


def _job_rules(attempts: list[sa.Row], jobs: list[sa.Row]) -> list[str]:
    """One running attempt exactly while a job runs; attempts made within the maximum."""
    found: list[str] = []
    running_per_job = Counter(a.job_id for a in attempts if a.state is AttemptState.RUNNING)
    for j in jobs:
        if not 0 <= j.attempts_made <= j.attempts_max:
            found.append(f"job {j.id} made {j.attempts_made} of {j.attempts_max} attempts")
        expected = 1 if j.state is JobState.RUNNING else 0
        if running_per_job[j.id] != expected:
            found.append(f"job {j.id} is {j.state.value} with {running_per_job[j.id]} running")
    return found
