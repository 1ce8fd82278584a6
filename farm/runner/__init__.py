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
    serve_keys.py   a tuning attempt asks farmd to serve its job key on its
                    devices (desired state) and waits until they do
    outcome.py      the file a child leaves so its parent can tell a clean
                    failure from a crash
    pidfile.py      <data_dir>/farmd.json: whether a farmd is running

A TVM crash (segfaults happen) kills only the child; the dispatcher sees a
signal and no outcome and retries the job on another phone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.lazy import lazy_names

if TYPE_CHECKING:
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

#: Where each name lives: imported on first use (PEP 562), so that importing
#: ``farm.runner.wake`` or ``pidfile`` (farmctl) does not load the dispatcher.
_SOURCES = {
    "ChildOutcome": "farm.runner.outcome",
    "Dispatcher": "farm.runner.dispatcher",
    "FarmdStatus": "farm.runner.pidfile",
    "TickReport": "farm.runner.dispatcher",
    "farmd_status": "farm.runner.pidfile",
    "read_outcome": "farm.runner.outcome",
    "remove_pidfile": "farm.runner.pidfile",
    "write_outcome": "farm.runner.outcome",
    "write_pidfile": "farm.runner.pidfile",
}


__getattr__ = lazy_names(__name__, _SOURCES)
