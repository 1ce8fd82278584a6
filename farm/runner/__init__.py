"""Running attempts: one child process per attempt, supervised by a dispatcher.

::

    dispatcher.py   Dispatcher.tick(now): reap, plan, claim, start children,
                    heartbeat, time out, collect exits; stop(deadline_s)
    child.py        python -m farm.runner.child: one attempt, isolated from farmd
    zygote.py       python -m farm.runner.zygote: TVM and the job code imported
                    once; forks each attempt's child (a warm start)
    warm.py         farmd's side of the zygote: start, fork, exit codes
    execute.py      a claimed job spec -> farm.jobs call -> Outcome
    gating.py       thermal gating before every measured run
    tune_phones.py  a tuning job's phones serve its job key; crashed apps are
                    relaunched under it mid-run, own keys restored after
    outcome.py      the file a child leaves so its parent can tell a clean
                    failure from a crash
    pidfile.py      <data_dir>/farmd.json: whether a farmd is running

A TVM crash (segfaults happen) kills only the child; the dispatcher sees a
signal and no outcome and retries the job on another phone.
"""

from farm.runner.dispatcher import Dispatcher, TickReport
from farm.runner.outcome import ChildOutcome, read_outcome, write_outcome
from farm.runner.pidfile import FarmdStatus, farmd_status, remove_pidfile, write_pidfile

__all__ = [
    "ChildOutcome",
    "Dispatcher",
    "FarmdStatus",
    "TickReport",
    "farmd_status",
    "read_outcome",
    "remove_pidfile",
    "write_outcome",
    "write_pidfile",
]
