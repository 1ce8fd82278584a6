"""How many build processes a tuning attempt starts: the host's free cores, shared by its attempts.

Builds are the host's CPU work of a tuning run (MetaSchedule compiles every
candidate with LLVM, seconds each); one build process left a 16-core host
idle. An attempt takes the cores it may run on (``os.sched_getaffinity``),
less those the host's other running tune attempts hold, and at most an equal
share of them with those attempts (:func:`builder_share`).

What each attempt holds is one small file per attempt process in a folder of
the host's data directory (``<data_dir>/tune-cores/<pid>.json``, written under
an ``fcntl`` lock on ``.lock`` there): a file whose process is gone (a killed
attempt) holds nothing and is removed by the next attempt that looks.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

import structlog

__all__ = ["builder_share", "held_builders", "host_cores"]

log = structlog.get_logger(__name__)


def host_cores() -> int:
    """The cores this process may run on (its CPU affinity), 1 at least."""
    return max(1, len(os.sched_getaffinity(0)))


def builder_share(cores: int, held: list[int]) -> int:
    """Build processes for a new attempt, given the builders other attempts on the host hold.

    The cores no other attempt holds, at most an equal share of all the
    cores with those attempts, 1 at least (a build needs a process even on a
    full host; the OS shares it then).

    Args:
        cores: the host's cores (:func:`host_cores`).
        held: each other running attempt's build processes.

    >>> builder_share(16, []), builder_share(16, [8]), builder_share(16, [4, 4])
    (16, 8, 5)
    >>> builder_share(2, []), builder_share(2, [2]), builder_share(16, [16])
    (2, 1, 1)
    """
    free = cores - sum(held)
    return max(1, min(free, cores // (len(held) + 1)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


@contextlib.contextmanager
def held_builders(ledger_dir: Path, wanted: int = 0, cores: int | None = None) -> Iterator[int]:
    """Hold build processes for this attempt for the block; yields how many.

    Args:
        ledger_dir: the host's ledger folder (``<data_dir>/tune-cores``), made if missing.
        wanted: build processes asked for (the config's ``jobs.tune_builder_workers``);
            0: :func:`builder_share` of the host's cores.
        cores: the host's cores; None: :func:`host_cores`.

    Yields:
        The build processes this attempt runs, noted in the ledger until the block ends.
    """
    ledger_dir.mkdir(parents=True, exist_ok=True)
    mine = ledger_dir / f"{os.getpid()}.json"
    with open(ledger_dir / ".lock", "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            held = []
            for path in ledger_dir.glob("*.json"):
                if path == mine:
                    continue
                with contextlib.suppress(OSError, ValueError):
                    if _alive(int(path.stem)):
                        held.append(int(json.loads(path.read_text(encoding="utf-8"))["builders"]))
                        continue
                    path.unlink(missing_ok=True)  # an attempt that was killed
            share = wanted or builder_share(host_cores() if cores is None else cores, held)
            mine.write_text(json.dumps({"builders": share}), encoding="utf-8")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    log.info("tuning_builders_held", builders=share, others_hold=held)
    try:
        yield share
    finally:
        mine.unlink(missing_ok=True)
