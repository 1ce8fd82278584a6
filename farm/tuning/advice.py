"""``enqueue tune --model --trials N``: a warning when N cannot reach a search batch.

On a CPU target each tuned task's first trial measures its default schedule
(:mod:`farm.tuning.baseline`), and the trials are shared over the tasks by
:func:`farm.tuning.search.plan_trials`, so a small ``--trials`` can leave
nothing to search: ``--trials 32`` on a model of 55 tasks gave one trial each
to the 32 heaviest, all default schedules, and the job ran, measured "32/32
trials" and applied no tuning record. The warning says so before the job
runs, counting the model's tasks as the job will (:func:`farm.tuning.tasks.
model_tasks`: TVM imports the model, a few seconds), and names the trials
that reach one batch.

It is advice: the job is queued either way, and a model whose tasks cannot be
counted here gets no warning.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from farm import logs
from farm.errors import FarmError

__all__ = ["trials_advice"]

log = logs.get_logger(__name__)

#: The batch when ``--trials-per-batch`` is not given (:class:`farm.kinds.tune.TuneSpec`).
DEFAULT_BATCH = 16


def trials_advice(params: Mapping[str, Any]) -> list[str]:
    """The warning for a CPU model tune whose ``--trials`` search less than one batch.

    Args:
        params: the ``params`` the flags made (:func:`farm.kinds.tune._params`):
            ``model.path`` a file on this host, ``trials``, ``trials_per_batch``,
            ``trials_per_task``, ``max_tasks``.

    Returns:
        One line, e.g. ``--trials 32 cannot reach a search batch on m.onnx's 55
        tasks: ...; give --trials 71 or more``; none when the trials reach a
        batch, no ``--trials`` was given, the target is no CPU, or the tasks
        cannot be counted.
    """
    from farm.tuning.search import plan_trials

    model = params.get("model")
    trials = params.get("trials")
    if not isinstance(model, Mapping) or not isinstance(trials, int) or trials < 1:
        return []
    if (model.get("target") or "cpu") != "cpu" or not isinstance(model.get("path"), str):
        return []
    path = Path(model["path"]).expanduser()
    shapes = model.get("input_shapes")
    try:
        costs = _task_costs(hashlib.sha256(path.read_bytes()).hexdigest(), str(path),
                            _frozen(shapes))
    except (OSError, FarmError, RuntimeError, ValueError) as exc:  # TVMError is a RuntimeError
        log.info("tune_trials_not_advised", model=path.name, reason=str(exc))
        return []
    tasks = costs[: params.get("max_tasks") or None]
    asked = params.get("trials_per_batch") or DEFAULT_BATCH
    batch = min(asked, trials)  # as TuneParams caps it
    plan, _ = plan_trials(tasks, trials, batch, params.get("trials_per_task"))
    searched = sum(max(0, n - 1) for n in plan)  # each tuned task's first: its default
    if searched >= batch:
        return []
    untuned = sum(n == 0 for n in plan)
    left = (f", and {untuned} of them get{'s' if untuned == 1 else ''} no trial"
            if untuned else "")
    # With one trial each for the tasks' defaults, the rest is searched: a batch more.
    return [(f"--trials {trials} cannot reach a search batch on {path.name}'s {len(tasks)} "
             f"tasks: each tuned task's first trial measures its default schedule, so "
             f"{searched} candidate{'s' if searched != 1 else ''} would be searched (a batch "
             f"is {batch}){left}; give --trials {len(tasks) + asked} or more")]


def _frozen(shapes: Any) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    """``input_shapes`` as a hashable key (None: the model's own)."""
    if not isinstance(shapes, Mapping):
        return None
    return tuple(sorted((str(k), tuple(int(d) for d in v)) for k, v in shapes.items()))


@functools.lru_cache(maxsize=8)
def _task_costs(sha256: str, path: str,  # noqa: ARG001 (the cache's key)
                shapes: tuple[tuple[str, tuple[int, ...]], ...] | None) -> list[float]:
    """The model's tasks' costs, heaviest first, as a CPU tune extracts them (once per file).

    ``sha256`` keys the cache by content, ``path`` is read.

    Raises:
        SpecError, CompileError: the model cannot be read or imported.
    """
    from farm.jobs.model import load_model, relax_module
    from farm.tuning.tasks import model_tasks

    model, inputs = load_model(Path(path), None if shapes is None else dict(shapes),
                               Path(path).name)
    # A plain llvm target: the small CNN has the same 7 tasks on it as on an aarch64
    # phone's target with 8 cores (the phone's target is known only when the job runs).
    return [t.cost for t in model_tasks(relax_module(model, inputs, Path(path).name),
                                        {"kind": "llvm"})]
