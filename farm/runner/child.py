r"""One attempt in its own process: ``python -m farm.runner.child``.

::

    python -m farm.runner.child --settings RUN/settings.json --job 7 --attempt 12 \
        --run-dir RUN --parent-pid 4242
    python -m farm.runner.child --config /etc/farm/farm.toml --job 7 --attempt 12

A segfault inside TVM ends this process, not farmd. The child loads the job,
gates each measured run thermally, runs the job kind through :mod:`farm.jobs`,
and tells the store itself: ``finish`` with every raw sample (exactly once:
the store refuses a second result), or ``fail_attempt`` with the error, whose
class decides the retry (:class:`farm.errors.Retry`). It then leaves
``outcome.json`` (:mod:`farm.runner.outcome`) and exits; no outcome means a
crash, which the dispatcher reports.

The child runs as the leader of its own process group (the dispatcher starts it
with ``start_new_session=True``), so killing the group also ends the
``popen_worker`` processes TVM starts. It watches its parent: if farmd dies
(even by ``kill -9``), the child kills its group rather than keep measuring on
a phone whose lease is about to be reaped and handed to another attempt.
It polls its parent pid rather than asking for ``PR_SET_PDEATHSIG``
(:mod:`farm.procs`): the dispatcher forks it from an APScheduler worker thread,
and that signal would fire when the thread ends (at farmd's warm stop, while
the attempt is still allowed to finish), not when farmd dies. A child forked
warm by the zygote (:mod:`farm.runner.zygote`) runs this same :func:`main`,
with the zygote as the parent it watches.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from farm.clock import Clock, SystemClock, wait_until
from farm.config import Settings, load_config
from farm.errors import FarmError, Retry, StoreError, StoreUnreachable
from farm.queue.records import Decision, Failure
from farm.queue.store import Store
from farm.runner.outcome import ChildOutcome, write_outcome
from farm.runner.wake import send_wake

if TYPE_CHECKING:
    from farm.runner.gating import ControllerGate

__all__ = ["main", "open_store", "run_attempt"]

log = structlog.get_logger(__name__)

PARENT_POLL_S = 0.5
#: Seconds between tries to reach a database server that is down.
STORE_RETRY_S = 2.0
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_NO_ATTEMPT = 3


def _watch_parent(parent_pid: int) -> None:
    """Kill this process group once the parent is gone (re-parented to init or a subreaper)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        log.warning("parent_gone", parent_pid=parent_pid)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _gate_for(
    settings: Settings, facts: dict[str, dict[str, Any]], kinds: dict[str, str], clock: Clock
) -> ControllerGate:
    """A gate reading each device through its kind's controller (``gating_reading``)."""
    from farm.health.verdict import Limits
    from farm.runner.gating import ControllerGate

    return ControllerGate(settings, Limits.of(settings), clock, facts, kinds)


def run_attempt(settings: Settings, job_id: int, attempt_id: int, run_dir: Path,
                clock: Clock | None = None) -> int:
    """Run one attempt to its end and report it to the store and in ``outcome.json``.

    Args:
        settings: farm's settings (database, tracker, adb, data folder).
        job_id: the claimed job.
        attempt_id: its running attempt.
        run_dir: where ``outcome.json`` goes.
        clock: the clock; the system's by default.

    Returns:
        The process exit code: 0 success, 1 a failure reported to the store,
        3 the attempt is no longer running (nothing done).
    """
    from farm.kinds.run import RunContext, execute
    from farm.runner.app_memory import AppMemory

    clock = clock or SystemClock()
    try:
        store = open_store(
            lambda: Store(settings.database_url, auto_migrate=settings.database.auto_migrate),
            settings.database.unreachable_wait_s, clock)
    except StoreError as exc:
        return _unreported(run_dir, exc)
    try:
        job = store.get_job(job_id)
        attempt = next((a for a in store.attempts(job_id) if a.id == attempt_id), None)
        if job is None or attempt is None or attempt.state.value != "running":
            stopped = Decision.IGNORED
            if attempt is not None:
                # Cancelled before this child began: saying so proves nothing runs
                # on its phones, and the store frees their holds (to ready).
                stopped = store.fail_attempt(
                    attempt_id, Failure("Cancelled", Retry.SAME_LIMIT, "attempt is not running"),
                    clock.now())
            write_outcome(run_dir, ChildOutcome("failed", True, stopped.value,
                                                message="attempt is not running"))
            return EXIT_NO_ATTEMPT
        devices = {s: d for s in attempt.serials if (d := store.get_device(s))}
        facts = {s: dict(d.facts) for s, d in devices.items()}
        kinds = {s: d.kind for s, d in devices.items()}
        with structlog.contextvars.bound_contextvars(job_id=job_id, attempt=attempt_id):
            try:
                gate = _gate_for(settings, facts, kinds, clock)
                outcome = execute(RunContext(settings, job, attempt, facts, gate, store, kinds,
                                             app_memory=AppMemory(gate.controller)))
            except Exception as exc:  # noqa: BLE001 - every failure is reported, classified
                return _report_failure(store, attempt_id, run_dir, Failure.from_error(exc), clock)
            try:
                stored = store.finish(attempt_id, outcome, clock.now())
            except StoreError as exc:
                write_outcome(run_dir, ChildOutcome("succeeded", False, "store_error",
                                                    "StoreError", "same_limit", str(exc)))
                return EXIT_FAILED
            log.info("attempt_finished", stored=stored, samples=len(outcome.samples))
            decision = "stored" if stored else "not_stored"
            write_outcome(run_dir, ChildOutcome("succeeded", True, decision))
            return EXIT_OK
    except StoreError as exc:  # the database went away before the job began
        return _unreported(run_dir, exc)
    finally:
        store.close()


def open_store(opener: Callable[[], Store], wait_s: float, clock: Clock,
               retry_s: float = STORE_RETRY_S) -> Store:
    """The store ``opener`` opens, tried again while its server cannot be reached.

    A child started while PostgreSQL is down used to end at once, its attempt
    reported as "cannot migrate ...". Now it waits up to ``wait_s`` (``[database]
    unreachable_wait_s``) for the server, then gives up with the reason; its
    attempt is handed back either way, costing no try (``StoreUnreachable`` is an
    infra kind, :data:`farm.queue.records.INFRA_KINDS`).

    Args:
        opener: opens the store (:class:`Store` on the settings' URL).
        wait_s: the longest wait for the server, in seconds.
        clock: measures the wait.
        retry_s: seconds between tries.

    Raises:
        StoreUnreachable: the server still could not be reached after ``wait_s``.
        StoreError: the database refused otherwise (not retried).
    """
    unreachable: list[StoreUnreachable] = []

    def reached() -> Store | None:
        try:
            return opener()
        except StoreUnreachable as exc:
            if not unreachable:
                log.warning("attempt_store_waiting", reason=str(exc), wait_s=wait_s)
            unreachable[:] = [exc]
            return None

    store = wait_until(reached, wait_s, interval_s=retry_s, clock=clock)
    if store is None:
        raise StoreUnreachable(f"{unreachable[-1]} (tried for {wait_s:g} s)")
    return store


def _unreported(run_dir: Path, error: StoreError) -> int:
    """Say in ``outcome.json`` that the store is unreachable (farmd hands the attempt back)."""
    log.error("attempt_store_unreachable", reason=str(error))
    write_outcome(run_dir, ChildOutcome("failed", False, "store_error", type(error).__name__,
                                        "same_limit", str(error)))
    return EXIT_FAILED


def _report_failure(
    store: Store, attempt_id: int, run_dir: Path, failure: Failure, clock: Clock
) -> int:
    log.warning("attempt_error", error_kind=failure.error_kind, retry=failure.retry.value,
                reason=failure.message, serial=failure.serial)
    decision: str | None = None
    try:
        if failure.infra:  # a database or tracker outage: handed back, costing no try
            store.requeue(attempt_id, f"{failure.error_kind}: {failure.message}", clock.now())
            decision = "handed_back"
        else:
            decision = store.fail_attempt(attempt_id, failure, clock.now()).value
    except StoreError as exc:
        log.error("attempt_failure_not_stored", reason=str(exc))
    write_outcome(run_dir, ChildOutcome(
        "failed", decision is not None, decision or "store_error",
        failure.error_kind, failure.retry.value, failure.message, failure.serial,
    ))
    return EXIT_FAILED


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m farm.runner.child", description=__doc__.splitlines()[0]
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--settings", type=Path, help="settings as JSON, written by the dispatcher")
    source.add_argument("--config", type=Path, help="farm's TOML config (as farmd reads it)")
    parser.add_argument("--job", type=int, required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--run-dir", type=Path, help="where outcome.json goes")
    parser.add_argument("--parent-pid", type=int, help="kill this process group when it dies")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (see :func:`run_attempt`)."""
    args = _parser().parse_args(argv)
    if args.parent_pid:
        _watch_parent(args.parent_pid)
    from farm import composition, logs

    composition.install()
    try:
        if args.settings is not None:
            settings = Settings.model_validate_json(args.settings.read_text(encoding="utf-8"))
        else:
            settings = load_config(args.config)
    except (OSError, ValueError, FarmError) as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 2
    logs.configure(json=True, level=settings.log_level, stream=sys.stderr)
    run_dir = args.run_dir or Path(settings.data_dir) / "runs" / f"attempt-{args.attempt}"
    try:
        return run_attempt(settings, args.job, args.attempt, run_dir)
    finally:
        # The report freed the phones: farmd's next tick now, not after this exit.
        send_wake(settings.data_dir)


if __name__ == "__main__":
    sys.exit(main())
