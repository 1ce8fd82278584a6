"""The dispatcher: puts queued jobs on phones, one child process per attempt.

farmd calls :meth:`Dispatcher.tick` every ``jobs.tick_interval_s`` and at once
on a wake (:mod:`farm.runner.wake`); a tick is::

    collect exits     a child that left outcome.json already told the store;
                      one that died without it (a signal, SIGSEGV in TVM) is
                      reported here with fail_attempt: retry on another phone
    time out          a child past its job's timeout_s is killed (its whole
                      process group) and the attempt fails with JobTimeout
    heartbeat         each running attempt's lease is extended, at most once per
                      jobs.tick_interval_s; a False answer (job cancelled, or
                      lease reaped) kills the child
    reap(now)         attempts whose lease ran out (a farmd that died) are requeued
    plan + claim      farm.queue.scheduler.plan on the store's snapshot, applied
                      atomically by Store.claim
    start             python -m farm.runner.child per claim, in its own session:
                      forked warm from the zygote (farm.runner.zygote, TVM
                      already imported) when it is up, else started cold

The dispatcher keeps only its children in memory: everything else is in the
store, so a farmd killed at any moment loses nothing (its children notice and
end themselves; their leases run out and the next farmd's ``reap`` requeues
them, as rq's ``StartedJobRegistry.cleanup`` does).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import structlog

from farm import composition, controllers
from farm.clock import Clock
from farm.config import Settings
from farm.errors import JobTimeout, Retry
from farm.kinds import KINDS, LeaseByKind
from farm.privacy import write_private
from farm.procs import signal_group
from farm.queue.helpers import HelperKind
from farm.queue.records import Claim, Decision, Failure
from farm.queue.scheduler import plan
from farm.queue.store import Store
from farm.runner.outcome import read_outcome
from farm.runner.pidfile import record_child
from farm.runner.wake import wake_waiters
from farm.runner.warm import WarmChild, ZygoteError, ZygoteKeeper

__all__ = ["ChildCommand", "Dispatcher", "RunningChild", "TickReport", "child_args",
           "child_command"]

log = structlog.get_logger(__name__)

RUNS_DIR = "runs"
SETTINGS_FILE = "settings.json"
CHILD_LOG = "child.log"
ZYGOTE_LOG = "zygote.log"
KILL_WAIT_S = 10.0

#: Device kinds whose attempts always start cold, never forked from the zygote.
#: The zygote has imported TVM, whose CUDA runtime is then in the process: a
#: forked child's first CUDA call fails with ``cudaErrorInitializationError``
#: (seen on an H100 through farmd: a tune measured its 32 trials in fresh
#: builder processes, then its attempt child failed to compile the tuned GEMM;
#: TVM's forking ``rpc_server`` fails alike, hence :mod:`farm.gpu.server`, docs/benchmarks.md).
COLD_KINDS = frozenset({"gpu"})

#: Builds a child's argv from its claim, its run folder and the settings file.
ChildCommand = Callable[[Claim, Path, Path], Sequence[str]]


def child_args(claim: Claim, run_dir: Path, settings_path: Path) -> list[str]:
    """The real child's arguments (:func:`farm.runner.child.main`) but ``--parent-pid``."""
    return [
        "--settings", str(settings_path), "--job", str(claim.job.id),
        "--attempt", str(claim.attempt.id), "--run-dir", str(run_dir),
    ]


def child_command(claim: Claim, run_dir: Path, settings_path: Path) -> list[str]:
    """The argv of the real child started cold, ``python -m farm.runner.child``."""
    return [sys.executable, "-m", "farm.runner.child", *child_args(claim, run_dir, settings_path),
            "--parent-pid", str(os.getpid())]


@dataclass
class RunningChild:
    """One attempt's child process.

    Attributes:
        claim: the job and attempt it runs.
        process: the child (leader of its own process group): a ``Popen`` when
            started cold, a :class:`WarmChild` when forked by the zygote.
        run_dir: its run folder (outcome.json, child.log).
        started_s: monotonic seconds when it was started.
        timeout_s: the job's time limit per attempt.
        beat_s: monotonic seconds of its last heartbeat (its start at first).
    """

    claim: Claim
    process: subprocess.Popen[bytes] | WarmChild
    run_dir: Path
    started_s: float
    timeout_s: float
    beat_s: float = 0.0

    @property
    def attempt_id(self) -> int:
        """The attempt's id."""
        return self.claim.attempt.id


@dataclass
class TickReport:
    """What one tick did, for logs and metrics.

    Attributes:
        reaped: attempts whose lease had run out.
        started: attempts whose child was started.
        ended: attempts whose child exited, with how (``"outcome:<decision>"``
            or ``"crash:<decision>"``).
        timed_out: attempts killed for running past their timeout.
        stopped: attempts killed because the store said stop (cancelled or reaped).
        held_back: why this tick claimed nothing new (the dispatcher's ``gate``),
            or None.
    """

    reaped: list[int] = field(default_factory=list)
    started: list[int] = field(default_factory=list)
    ended: dict[int, str] = field(default_factory=dict)
    timed_out: list[int] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)
    held_back: str | None = None


def _watch_exit(process: subprocess.Popen[bytes], on_exit: Callable[[], None]) -> None:
    """Wait for ``process`` to exit, then call ``on_exit``.

    Popen serialises ``waitpid`` with a lock, so the tick's ``poll()`` sees
    the child running until this thread has reaped it, then its exit code.
    """
    process.wait()
    on_exit()


class Dispatcher:
    """Runs claimed attempts in child processes; needs nothing else from farmd.

    Args:
        store: the queue.
        settings: farm's settings; written to each run folder for the child.
        clock: wall time for the store, monotonic time for timeouts.
        command: builds a child's argv (default :func:`child_command`); a
            wrapper such as ``nice`` or ``systemd-run`` can be put in front.
            Children are forked warm only with the default command (and
            ``[jobs] warm_children``): a wrapper must see every start.
        runs_dir: where run folders go; ``<data_dir>/runs`` by default.
        on_exit: called (on a watcher thread) as soon as a cold child exits, so
            farmd ticks at once to collect it and give its phones new work
            (:class:`farm.runner.wake.TickLoop`); None: found at the next tick.
        gate: asked before each tick's claims; a reason (e.g. the tracker is
            down) makes the tick claim nothing, so no attempt is spent on an
            outage; None (or no gate): claim as usual. Running attempts are
            not touched.

    Attributes:
        warm: fork children from the zygote when it is ready; a bench may
            turn it off to compare (the zygote keeps running).
        zygotes: the zygote's keeper, from the first tick on (None before, or
            when children start cold only).
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        clock: Clock,
        *,
        command: ChildCommand = child_command,
        runs_dir: Path | None = None,
        on_exit: Callable[[], None] | None = None,
        gate: Callable[[], str | None] | None = None,
    ) -> None:
        # The kinds plan() reads: a kind it does not know stays queued for a host that
        # knows it, so a dispatcher with none installed would idle without a word.
        # A no-op where farmd installed them already.
        composition.install()
        self.store = store
        self.gate = gate
        self._held_back: str | None = None
        self.settings = settings
        self.clock = clock
        self.command = command
        self.on_exit = on_exit
        self.runs_dir = runs_dir or Path(settings.data_dir) / RUNS_DIR
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.children: dict[int, RunningChild] = {}
        self.stopping = False
        self._ticks = 0
        self._settings_path = self.runs_dir / SETTINGS_FILE
        # 0600 whatever the umask: database_url may hold a password (farm.privacy).
        write_private(self._settings_path, settings.model_dump_json())
        # Each kind's lease (farm.kinds); a kind this farm does not know has none,
        # so plan() leaves its jobs queued for a host that knows it.
        self.lease_s_by_kind: Mapping[str, float] = LeaseByKind(settings.jobs)
        # The kinds whose running jobs take helper attempts (their hook), under their lease.
        self.helper_kinds: Mapping[str, HelperKind] = {
            name: HelperKind(self.lease_s_by_kind[name], kind.helper_attempts)
            for name, kind in KINDS.items() if kind.helper_attempts is not None}
        self.warm = settings.jobs.warm_children and command is child_command
        self.zygotes: ZygoteKeeper | None = None  # started by the first tick

    # --- the tick ----------------------------------------------------------------

    def tick(self, now: datetime | None = None) -> TickReport:
        """Advance every running attempt and start new ones (see the module doc).

        Args:
            now: the time for the store's records; the clock's by default.

        Returns:
            What this tick did.

        Raises:
            StoreError: the database failed; the next tick retries.
        """
        now = now or self.clock.now()
        report = TickReport()
        self._collect(now, report)
        self._time_out(now, report)
        self._heartbeat(now, report)
        report.reaped = [a.id for a in self.store.reap(now)]  # the store logs lease_expired
        if report.ended or report.timed_out or report.stopped or report.reaped:
            # A job may have ended without its child's wake (a crash, a timeout).
            wake_waiters(Path(self.settings.data_dir))
        if not self.stopping:
            report.held_back = self._held_back_now()
            if report.held_back is None:
                self._start_new(now, report)
            if report.held_back is None:  # _start_new's second look may hold back too
                self._start_helpers(now, report)
            self._keep_zygote()
        self._ticks += 1
        return report

    def _held_back_now(self) -> str | None:
        """The gate's reason to claim nothing now; logged when it changes."""
        reason = self.gate() if self.gate is not None else None
        if reason != self._held_back:
            if reason is None:
                log.info("dispatch_resumed", was=self._held_back)
            else:
                log.warning("dispatch_held_back", reason=reason)
            self._held_back = reason
        return reason

    def _collect(self, now: datetime, report: TickReport) -> None:
        for attempt_id, child in list(self.children.items()):
            code = child.process.poll()
            if code is None:
                continue
            # Forgotten only once judged: a StoreError here (the database is down)
            # leaves the child to the next tick instead of losing its ending.
            report.ended[attempt_id] = self._ended(child, code, now)
            del self.children[attempt_id]

    def _ended(self, child: RunningChild, code: int, now: datetime) -> str:
        """Judge an exited child; report a crash to the store."""
        outcome = read_outcome(child.run_dir)
        if outcome is not None and outcome.committed:
            log.info("attempt_child_exited", attempt=child.attempt_id, job_id=child.claim.job.id,
                     exit_code=code, status=outcome.status, decision=outcome.decision)
            return f"outcome:{outcome.decision}"
        if outcome is not None:  # the child ended on purpose, but the store refused its report
            failure = Failure(outcome.error_kind or "StoreError", Retry.SAME_LIMIT,
                              outcome.message or "the child could not report to the store")
            if failure.infra:  # an outage, not the job's fault: it costs no try
                handed = self.store.requeue(child.attempt_id,
                                            f"{failure.error_kind}: {failure.message}", now)
                log.warning("attempt_handed_back", attempt=child.attempt_id,
                            job_id=child.claim.job.id, reason=failure.message, requeued=handed)
                return "outage:requeued" if handed else "outage:ended"
        else:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            log_path = child.run_dir / CHILD_LOG
            failure = Failure("ChildCrashed", Retry.OTHER_PHONE,
                              f"attempt process died with {how} and no outcome (see {log_path})")
        decision = self.store.fail_attempt(child.attempt_id, failure, now)
        log.warning("attempt_child_crashed", attempt=child.attempt_id, job_id=child.claim.job.id,
                    exit_code=code, reason=failure.message, decision=decision.value)
        return f"crash:{decision.value}"

    def _time_out(self, now: datetime, report: TickReport) -> None:
        now_s = self.clock.monotonic()
        for attempt_id, child in list(self.children.items()):
            if now_s - child.started_s < child.timeout_s:
                continue
            self._kill(child)
            del self.children[attempt_id]
            if read_outcome(child.run_dir) is not None:
                continue  # it finished just before the kill; the store already knows
            error = JobTimeout(child.claim.job.id, child.timeout_s)
            decision = self.store.fail_attempt(attempt_id, error, now)
            log.warning("attempt_timed_out", attempt=attempt_id, job_id=child.claim.job.id,
                        timeout_s=child.timeout_s, decision=decision.value)
            report.timed_out.append(attempt_id)

    def _heartbeat(self, now: datetime, report: TickReport) -> None:
        # Once per tick interval, not on every woken tick: a lease is minutes
        # long, and a heartbeat is a write transaction per running child.
        now_s = self.clock.monotonic()
        for attempt_id, child in list(self.children.items()):
            if now_s - child.beat_s < self.settings.jobs.tick_interval_s:
                continue
            child.beat_s = now_s
            if self.store.heartbeat(attempt_id, now) or read_outcome(child.run_dir) is not None:
                continue  # still running, or it ended on purpose and is exiting
            # Cancelled, or reaped while farmd stalled: the attempt must stop.
            self._kill(child)
            del self.children[attempt_id]
            decision = self.store.fail_attempt(
                attempt_id,
                Failure("Cancelled", Retry.NEVER, "stopped: the store ended the attempt"),
                now,
            )
            if decision is Decision.IGNORED:  # it committed its result a moment ago
                report.ended[attempt_id] = "outcome:stored"
                continue
            log.info("attempt_stopped", attempt=attempt_id, job_id=child.claim.job.id,
                     decision=decision.value)
            report.stopped.append(attempt_id)

    def _start_new(self, now: datetime, report: TickReport) -> None:
        # Only the head of the queue: a tick's cost does not grow with the queue.
        # This host's phones only: the owner runs a phone (farm.queue.hosts).
        # Device kinds this farm has a controller for: a newer farm's kind gets no job here.
        device_kinds = controllers.kinds()
        head = self.store.head(now, seed=self._ticks, kinds=self.lease_s_by_kind.keys(),
                               host=self.settings.host_id, device_kinds=device_kinds)
        assignments = plan(head, now, seed=self._ticks, lease_s_by_kind=self.lease_s_by_kind,
                           device_kinds=device_kinds)
        if not assignments:
            return
        # The gate again, now that the queue is read: the tick's first look may
        # predate a tracker's death and a job queued right after it (seen in a
        # full run: claimed 2 s before the new tracker started). A job this read
        # found was queued after anything that happened before its queueing, so
        # this look sees an outage that came first.
        if (reason := self._held_back_now()) is not None:
            report.held_back = reason
            return
        for claim in self.store.claim(assignments, now, host=self.settings.host_id):
            self._spawn(claim, now)
            report.started.append(claim.attempt.id)

    def _start_helpers(self, now: datetime, report: TickReport) -> None:
        """Start helper attempts of other hosts' running jobs on idle phones.

        After this tick's own claims: the queue's jobs come first. Only jobs of a
        kind that takes helpers (:attr:`farm.kinds.base.Kind.helper_attempts`: a
        model tune) get one; a helper tunes the task rows the job's main attempt
        left (:mod:`farm.queue.helpers`).
        """
        host = self.settings.host_id
        if not self.helper_kinds or host is None or not self.settings.jobs.tune_helpers:
            return
        for claim in self.store.claim_helpers(host, self.helper_kinds, now):
            self._spawn(claim, now)
            report.started.append(claim.attempt.id)

    def _keep_zygote(self) -> None:
        """Start the zygote, or replace a dead one, once this tick's claims have started.

        After them, so that a claim never waits on it; until it has imported
        TVM (seconds), children start cold.
        """
        if not self.warm:
            return
        if self.zygotes is not None:
            self.zygotes.ready_zygote()
            return
        data_dir = Path(self.settings.data_dir).expanduser()
        self.zygotes = ZygoteKeeper(
            self.runs_dir / ZYGOTE_LOG, self.clock,
            backoff_base_s=self.settings.supervise.backoff_base_s,
            backoff_max_s=self.settings.supervise.backoff_max_s,
            on_start=lambda pid: record_child(data_dir, "zygote", pid),
        )

    def _spawn(self, claim: Claim, now: datetime) -> None:
        run_dir = self.runs_dir / f"attempt-{claim.attempt.id}"
        shutil.rmtree(run_dir, ignore_errors=True)  # a leftover of a wiped database
        run_dir.mkdir(parents=True)
        log_path = run_dir / CHILD_LOG
        process: subprocess.Popen[bytes] | WarmChild | None = None
        zygote = (self.zygotes.ready_zygote()
                  if self.warm and self.zygotes and not self._starts_cold(claim) else None)
        if zygote is not None:
            try:
                process = zygote.fork(child_args(claim, run_dir, self._settings_path), run_dir,
                                      log_path)
            except ZygoteError as exc:
                log.warning("attempt_child_not_forked", attempt=claim.attempt.id,
                            reason=str(exc))  # started cold below
        try:
            if process is None:
                process = self._start_cold(claim, run_dir, log_path)
        except OSError as exc:
            decision = self.store.fail_attempt(
                claim.attempt.id,
                Failure("SpawnError", Retry.SAME_LIMIT, f"cannot start child: {exc}"),
                now,
            )
            log.error("attempt_not_started", attempt=claim.attempt.id, reason=str(exc),
                      decision=decision.value)
            return
        started_s = self.clock.monotonic()
        self.children[claim.attempt.id] = RunningChild(
            claim, process, run_dir, started_s, claim.job.timeout_s, started_s,
        )
        log.info("attempt_child_spawned", attempt=claim.attempt.id, job_id=claim.job.id,
                 pid=process.pid, warm=isinstance(process, WarmChild))
        # A warm child's exit comes over the zygote's socket, read by the next
        # tick; a thread waiting on it would hold the zygote's lock for the
        # attempt's whole life. Its phones are free once it has reported, and it
        # wakes farmd then (farm.runner.child calls farm.runner.wake.send_wake).
        if self.on_exit is not None and isinstance(process, subprocess.Popen):
            threading.Thread(target=_watch_exit, args=(process, self.on_exit),
                             name=f"farm-child-{claim.attempt.id}", daemon=True).start()

    def _starts_cold(self, claim: Claim) -> bool:
        """Whether ``claim`` holds a device of a kind in :data:`COLD_KINDS`."""
        devices = (self.store.get_device(serial) for serial in claim.attempt.serials)
        return any(d is not None and d.kind in COLD_KINDS for d in devices)

    def _start_cold(self, claim: Claim, run_dir: Path, log_path: Path) -> subprocess.Popen[bytes]:
        """Start the child as a new Python process (raises OSError)."""
        argv = list(self.command(claim, run_dir, self._settings_path))
        with log_path.open("wb") as log_file:
            return subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=run_dir,
            )

    # --- stopping --------------------------------------------------------------------

    def _kill(self, child: RunningChild) -> None:
        """SIGKILL the child's whole process group and reap the child."""
        signal_group(child.process.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.process.wait(timeout=KILL_WAIT_S)

    def stop(self, deadline_s: float, poll_s: float = 0.2) -> list[int]:
        """Take no more work; let running attempts finish until the deadline, then kill them.

        Attempts still running at the deadline are killed (process groups) and
        their jobs requeued without counting the attempt (:meth:`Store.requeue`):
        a clean stop is nobody's fault.

        Args:
            deadline_s: seconds to let running attempts finish.
            poll_s: seconds between checks.

        Returns:
            The attempts that were killed.
        """
        self.stopping = True
        end_s = self.clock.monotonic() + deadline_s
        while self.children and self.clock.monotonic() < end_s:
            self.tick()
            if self.children:
                child = next(iter(self.children.values()))
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.process.wait(timeout=poll_s)
        self.tick()
        killed = []
        for attempt_id, child in list(self.children.items()):
            self._kill(child)
            del self.children[attempt_id]
            if read_outcome(child.run_dir) is None:
                self.store.requeue(attempt_id, "farmd stopped before the attempt finished",
                                   self.clock.now())
                log.warning("attempt_requeued_at_stop", attempt=attempt_id)
            killed.append(attempt_id)
        return killed

    def close(self) -> None:
        """Kill every child at once, then the zygote (farmd is going away)."""
        for child in self.children.values():
            self._kill(child)
        self.children.clear()
        if self.zygotes is not None:
            self.zygotes.close()
