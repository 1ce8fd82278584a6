"""The outcome file a child leaves in its run folder before it exits.

The parent decides how an attempt ended from this file and the exit status::

    outcome.json present          the child ended on purpose: it already told
                                  the store (finish or fail_attempt)
    absent, or ``committed`` false  a crash (a signal such as SIGSEGV inside TVM,
                                  or Python dying before it could report): the
                                  parent reports it with ``fail_attempt``

The file is written to a temporary name and renamed, so a reader sees either
nothing or the whole file (POSIX ``rename`` is atomic within one file system).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["OUTCOME_FILE", "ChildOutcome", "read_outcome", "write_outcome"]

OUTCOME_FILE = "outcome.json"


@dataclass(frozen=True)
class ChildOutcome:
    """How a child ended, as it reports it.

    Attributes:
        status: ``"succeeded"`` or ``"failed"``.
        committed: whether the child's call to the store went through (a result
            stored by ``finish``, or a failure recorded by ``fail_attempt``).
        decision: what the store did: ``"stored"``, ``"not_stored"`` (the
            attempt had already ended), or a ``Decision`` value for failures.
        error_kind: the error's class name for failures, e.g. ``"SessionError"``.
        retry: the error's :class:`farm.errors.Retry` value for failures.
        message: the error message for failures.
        serial: the phone blamed, if any.
    """

    status: str
    committed: bool
    decision: str = ""
    error_kind: str | None = None
    retry: str | None = None
    message: str | None = None
    serial: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready data."""
        return asdict(self)


def write_outcome(run_dir: Path, outcome: ChildOutcome) -> Path:
    """Write ``outcome.json`` into ``run_dir`` atomically.

    Args:
        run_dir: the attempt's run folder (created if missing).
        outcome: what to record.

    Returns:
        The file's path.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / OUTCOME_FILE
    tmp = run_dir / f".{OUTCOME_FILE}.{os.getpid()}.tmp"
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(outcome.to_json(), handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path


def read_outcome(run_dir: Path) -> ChildOutcome | None:
    """The outcome a child left, or None if it left none (or an unreadable one).

    An unreadable file counts as none: a child that died mid-write has crashed.
    """
    try:
        data = json.loads((run_dir / OUTCOME_FILE).read_text(encoding="utf-8"))
        return ChildOutcome(**data)
    except (OSError, ValueError, TypeError):
        return None
