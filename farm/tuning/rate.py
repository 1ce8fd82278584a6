"""Tuning throughput: measured trials per phone-hour, and the most the phones could measure.

A phone measuring candidates is busy for each trial's upload (the ``.so``
sent and loaded) and its timed runs; everything else (the search on the host,
the builds, waiting for the next batch) leaves it idle. The
measurement-bound limit is what the phones would measure were they never idle::

    limit per phone-hour = 3600 / (mean timed run seconds + mean upload seconds)

A trial's timed run seconds come from its record: MetaSchedule's evaluator
runs ``repeat`` times ``number`` calls, each repeat lasting at least
``min_repeat_ms`` (it raises ``number`` until it does), and records each
repeat's mean call. Uploads are timed where they happen, in MetaSchedule's
runner processes, by :class:`TimedUpload`, which appends one line per upload
to ``<work_dir>/farm_uploads.jsonl``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.clock import wait_until
from farm.errors import CompileError
from farm.jobs.params import TimingParams
from farm.jobs.session import connect_fresh
from farm.jobs.tuning_db import FAILED_RUN_S, RECORDS_FILE
from farm.tuning.kept_session import remote_name

__all__ = ["BUDGET_SPENT", "MEASURE_UNTIL_FILE", "UPLOADS_FILE", "BudgetSpent", "TimedSession",
           "TimedUpload", "cut_by_budget",
           "limit_per_phone_hour", "measure_until", "read_measure_until", "run_overhead_s",
           "trial_busy_s", "trials_per_phone_hour", "wait_for_build"]

UPLOADS_FILE = "farm_uploads.jsonl"

#: The work folder's file saying until when candidates are measured (:func:`measure_until`).
MEASURE_UNTIL_FILE = "farm_measure_until.json"

#: What a candidate's run error says when the time budget cut it (:class:`BudgetSpent`).
BUDGET_SPENT = "the tuning's time budget is spent: not measured"


class BudgetSpent(RuntimeError):
    """A candidate not measured because the time budget is spent: dropped, not recorded.

    Not a ``TimeoutError``: MetaSchedule's ``RPCRunner`` reports one as "Timeout,
    killed after N seconds", losing why, where any other exception's message is
    kept in the result's ``error_msg`` (apache/tvm
    ``python/tvm/s_tir/meta_schedule/runner/rpc_runner.py``, ``RPCRunnerFuture.result``).
    Raised in a runner's worker process, it comes back pickled (``message``:
    an exception is rebuilt from its arguments).
    """

    def __init__(self, message: str = BUDGET_SPENT) -> None:
        super().__init__(message)


def cut_by_budget(error_msg: str | None) -> bool:
    """Whether a run's error says the time budget cut it (:class:`BudgetSpent`).

    >>> cut_by_budget("RPCRunner: An exception occurred: " + BUDGET_SPENT), cut_by_budget(None)
    (True, False)
    """
    return error_msg is not None and BUDGET_SPENT in str(error_msg)


@dataclass(frozen=True)
class TimedUpload:
    """MetaSchedule ``f_upload_module`` that times each upload (picklable, runs in its workers).

    Attributes:
        log_path: the JSON-lines file an upload's seconds are appended to.
        build_wait_s: with pipelined builds (:mod:`farm.tuning.builder`),
            how long to wait for the library to be built; 0: it is built.
        until_path: a file holding the time (UNIX seconds) after which no
            candidate is measured (:func:`measure_until`), the tuning's time
            budget; None, or no file: no limit.
    """

    log_path: str
    build_wait_s: float = 0.0
    until_path: str | None = None

    def __call__(self, session: Any, local_path: str, _remote_path: str) -> Any:
        """Upload and load ``local_path`` as MetaSchedule's default does; log the seconds.

        The library goes under its own name (:func:`farm.tuning.kept_session.remote_name`,
        not MetaSchedule's ``remote_path``, the same for every candidate) and
        is removed once loaded, so a session kept for the next candidate
        (:class:`farm.tuning.kept_session.KeptSession`) never loads an earlier one.

        Raises:
            CompileError: a pipelined build failed or was not done in ``build_wait_s``
                (MetaSchedule records the candidate as failed).
            BudgetSpent: the time budget is spent (``until_path``): the
                candidate is dropped unrecorded, and a resumed job measures it.
        """
        self._in_budget()
        if self.build_wait_s > 0:
            wait_for_build(local_path, self.build_wait_s)
            self._in_budget()
        start = time.monotonic()
        remote = remote_name(local_path)
        session.upload(local_path, remote)
        module = session.load_module(remote)
        session.remove(remote)
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"upload_s": time.monotonic() - start}) + "\n")
        return module


    def _in_budget(self) -> None:
        until = read_measure_until(self.until_path)
        if until is not None and time.time() > until:
            raise BudgetSpent


def measure_until(path: Path, until: float | None) -> None:
    """Write when the runner stops measuring candidates (UNIX seconds; None: no limit).

    A batch in flight when the time budget ends would otherwise be measured
    to its last candidate (a batch of 16 on a phone: 30 s and more).
    """
    if until is None:
        path.unlink(missing_ok=True)
        return
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(until), encoding="utf-8")
    os.replace(partial, path)


def read_measure_until(path: str | None) -> float | None:
    """The time :func:`measure_until` wrote at ``path``; None: no file (no limit)."""
    if path is None:
        return None
    try:
        return float(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def wait_for_build(path: str, deadline_s: float) -> None:
    """Wait until the pipelined build of ``path`` is done (:mod:`farm.tuning.builder`).

    Raises:
        CompileError: it left ``<path>.error`` (its reason is the message), or
            neither the library nor that file came within ``deadline_s``.
    """
    from farm.tuning.builder import ERROR_SUFFIX

    error = Path(path + ERROR_SUFFIX)
    if not wait_until(lambda: os.path.exists(path) or error.exists(), deadline_s,
                      interval_s=0.05):
        raise CompileError(path, f"not built within {deadline_s:g} s")
    if not os.path.exists(path):
        raise CompileError(path, error.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class TimedSession:
    """MetaSchedule ``f_create_session`` that times each session's start (picklable).

    A candidate's session (tracker request, connection, thread pool; or a
    kept one's round trip, :class:`farm.tuning.kept_session.KeptSession`) is
    overhead the picks' check pays per run as well
    (:mod:`farm.tuning.check_cost`); one line ``{"session_s": ...}`` per
    candidate is appended to the uploads' log.

    Attributes:
        log_path: the JSON-lines file (:data:`UPLOADS_FILE`).
        create: the session maker wrapped; None: MetaSchedule's default
            connection, old sessions closed first (:func:`farm.jobs.session.connect_fresh`).
    """

    log_path: str
    create: Callable[[Any], Any] | None = None

    def __call__(self, rpc_config: Any) -> Any:
        """Open the session as ``create`` does; log the seconds it took."""
        start = time.monotonic()
        session = (self.create or connect_fresh)(rpc_config)
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"session_s": time.monotonic() - start}) + "\n")
        return session


def trial_busy_s(run_secs: list[float], timing: TimingParams) -> float:
    """Seconds a phone spends timing one trial: ``repeat`` repeats of ``min_repeat_ms`` at least.

    >>> trial_busy_s([0.001, 0.001], TimingParams(number=3, repeat=2, min_repeat_ms=0))
    0.006
    """
    floor_s = timing.min_repeat_ms / 1000.0
    return sum(max(s * timing.number, floor_s) for s in run_secs)


def _upload_s(work_dir: Path, key: str = "upload_s") -> list[float]:
    path = work_dir / UPLOADS_FILE
    if not path.is_file():
        return []
    seconds = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            seconds.append(float(json.loads(line)[key]))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a kill, or one of the other key
    return seconds


def run_overhead_s(work_dir: Path, recent: int = 32) -> float:
    """Seconds a run on a phone costs beyond its timed repeats: a session and an upload.

    The means of the last ``recent`` sessions' and uploads' seconds logged in
    the work folder (:class:`TimedSession`, :class:`TimedUpload`); 0 s for
    what none was logged of yet.

    Args:
        work_dir: the work folder.
        recent: the last logged ones that count (the host's load changes).
    """
    total_s = 0.0
    for key in ("session_s", "upload_s"):
        seconds = _upload_s(work_dir, key)[-recent:]
        total_s += sum(seconds) / len(seconds) if seconds else 0.0
    return total_s


def limit_per_phone_hour(work_dir: Path, timing: TimingParams) -> float | None:
    """Measured trials per phone-hour were the phones never idle (None before any trial).

    Args:
        work_dir: the work folder (records and upload times).
        timing: how each candidate was timed.
    """
    path = work_dir / RECORDS_FILE
    busy = []
    for line in path.read_bytes().splitlines() if path.is_file() else []:
        try:
            run_secs = [float(s) for s in json.loads(line)[1][1] or []]
        except (ValueError, IndexError, TypeError):
            continue
        if run_secs and all(s < FAILED_RUN_S for s in run_secs):
            busy.append(trial_busy_s(run_secs, timing))
    if not busy:
        return None
    uploads = _upload_s(work_dir)
    per_trial_s = sum(busy) / len(busy) + (sum(uploads) / len(uploads) if uploads else 0.0)
    return 3600.0 / per_trial_s if per_trial_s > 0 else None


def trials_per_phone_hour(trials: int, elapsed_s: float, phones: int) -> float | None:
    """Measured trials per phone-hour (None before any time passed).

    >>> trials_per_phone_hour(10, 1800.0, 2)
    10.0
    """
    if elapsed_s <= 0 or phones <= 0:
        return None
    return trials / (elapsed_s / 3600.0) / phones
