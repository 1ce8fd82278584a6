"""A runner worker's next session waits for no session of its own left in garbage."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from farm.jobs.session import ThreadPoolSession, connect_fresh
from farm.tuning.rate import TimedSession


class _Session:
    """Stands in for an RPC session: records the thread pool call."""

    def __init__(self) -> None:
        self.cycle: Any = self
        self.calls: list[tuple[int, int]] = []

    def get_function(self, _name: str) -> Any:
        return lambda mode, threads: self.calls.append((mode, threads))


class _Config:
    """An RPCConfig whose phone is free only once the last session it gave is gone."""

    def __init__(self) -> None:
        self.last: weakref.ref[_Session] | None = None

    def connect_server(self) -> _Session:
        assert self.last is None or self.last() is None, "the phone is still held"
        session = _Session()
        self.last = weakref.ref(session)
        return session


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    """As in an idle worker: the cycle collector does not run on its own."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_automatic_gc")
@pytest.mark.parametrize("make", [
    lambda _tmp: connect_fresh,
    lambda _tmp: ThreadPoolSession(1, 1),
    lambda tmp: TimedSession(str(tmp / "uploads.jsonl")),
], ids=["connect_fresh", "ThreadPoolSession", "TimedSession"])
def test_a_session_held_only_by_a_reference_cycle_is_closed_first(
        tmp_path: Path, make: Any) -> None:
    """A candidate's run raised and left its session in a cycle (the traceback through
    MetaSchedule's cleanup context manager): the next session is asked for only once that one
    is gone, not after the phone's 10-hour session timeout."""
    config = _Config()
    create = make(tmp_path)
    create(config)  # dropped at once, but a cycle keeps it
    assert config.last is not None and config.last() is not None
    create(config)
    with pytest.raises(AssertionError, match="still held"):
        config.connect_server()  # the check itself holds: the new session is alive
