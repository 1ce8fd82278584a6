"""Put a phone in a state for a test's setup, the way the fleet does: compare-and-set.

Imported by name (``tests/`` is on ``sys.path`` through its ``conftest.py``).
"""

from __future__ import annotations

from datetime import datetime

from farm.queue import DeviceState, Store


def put_state(store: Store, serial: str, to_state: DeviceState, reason: str, now: datetime) -> None:
    """Move a phone to ``to_state`` from what a read of its row says (a new phone is added first).

    Uses :meth:`Store.move_device` with the state and attempt just read, so a
    setup never writes over a state it did not check.

    Raises:
        AssertionError: the phone moved between the read and the write (nothing
            else writes during a test's setup, so that is a bug).
    """
    read = store.get_device(serial)
    if read is None:
        read = store.upsert_device(serial, now)
    moved = store.move_device(serial, to_state, reason, now,
                              expect_state=read.state, expect_attempt=read.attempt_id)
    assert moved, f"{serial} changed under the test's setup"
