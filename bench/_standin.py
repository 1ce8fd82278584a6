"""The stand-in attempt child that the dispatch bench scripts run instead of a real job.

Import as ``from _standin import standin_argv, standin_child`` (the scripts run
as ``python bench/<script>.py``, so ``bench/`` is on ``sys.path``). A script's
``--child SETTINGS ATTEMPT RUN_DIR WORK_S`` mode calls :func:`standin_child`;
its dispatcher's ``command`` returns :func:`standin_argv`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from farm.clock import SystemClock
from farm.config import Settings
from farm.queue import Outcome, Store
from farm.runner.outcome import ChildOutcome, write_outcome
from farm.runner.wake import send_wake


def standin_argv(script: str, settings_path: Path, attempt_id: int, run_dir: Path,
                 work_s: float) -> list[str]:
    """argv of ``script``'s ``--child`` mode for one attempt."""
    return [sys.executable, script, "--child", str(settings_path), str(attempt_id), str(run_dir),
            str(work_s)]


def standin_child(settings_path: Path, attempt_id: int, run_dir: Path, work_s: float) -> int:
    """Hold the phone ``work_s`` seconds, commit a one-sample result, as an attempt child ends.

    Leaves ``outcome.json`` in ``run_dir`` and sends farmd's wake datagram, as
    :mod:`farm.runner.child` does once it reported (a no-op where no farmd of
    the settings' ``data_dir`` listens). Returns the exit code, 0.
    """
    settings = Settings.model_validate_json(settings_path.read_text())
    with Store(settings.database_url) as store:
        time.sleep(work_s)  # the job's work on the phone
        stored = store.finish(attempt_id, Outcome({"kind": "gemm", "bench": True}, [1e-3]),
                              SystemClock().now())
    write_outcome(run_dir, ChildOutcome("succeeded", True, "stored" if stored else "not_stored"))
    send_wake(settings.data_dir)
    return 0
