"""The seconds a tuning attempt has left: the arithmetic behind ``eta_s``.

A tuning run ends either when its trials are measured or when its time
budget (``--for``) is spent, and then it checks its picks
(:mod:`farm.jobs.tune_check_cost` prices the time kept back for that).
Early in a run its measured rate is faster than later: the first round
measures each task's default schedule, the first searches use small
populations, and the XGBoost refits grow with the records. So:

- the rate is that of the recent batches (:data:`RECENT_BATCHES`), never since
  the start;
- with a time budget, the run is taken to end with the budget (less half
  a batch, what it ends short by: :func:`budget_end_s`) unless the
  trials left at the recent rate end first by a wide margin
  (:data:`CLEAR_MARGIN`), since that rate will slow down;
- without one, the trials left at the recent rate plus the picks' check.
"""

from __future__ import annotations

__all__ = ["CLEAR_MARGIN", "RECENT_BATCHES", "budget_end_s", "estimate_eta_s", "seconds_per_trial"]

#: Measured batches whose rate counts (the last ones): the rate slows as a run goes on.
RECENT_BATCHES = 4

#: The trials decide the ETA of a run with a time budget only when they would still end
#: inside it at this many times the recent seconds per trial (the rate slows later on).
CLEAR_MARGIN = 3.0


def seconds_per_trial(measured_s: list[tuple[float, int]]) -> float | None:
    """Seconds per measured trial over the last :data:`RECENT_BATCHES` batches.

    The attempt's start (imports, task extraction, the builders' warm-up,
    the first search) is paid once, so with two or more measured batches
    the rate counts from the first of the recent ones; with one, from the
    start.

    Args:
        measured_s: ``(seconds since the attempt's start, trials measured in it)``
            at the start (``(0, 0)``) and after each measured batch, in order.

    Returns:
        The seconds per trial, None before a trial is measured.

    >>> seconds_per_trial([(0.0, 0), (60.0, 2), (70.0, 4), (90.0, 6)])
    7.5
    >>> seconds_per_trial([(0.0, 0), (30.0, 2)])
    15.0
    """
    measured = [(t, n) for t, n in measured_s if n > 0]
    if not measured:
        return None
    recent = measured[-(RECENT_BATCHES + 1):]
    first = recent[0] if len(recent) >= 2 else (measured_s[0] if measured_s else recent[0])
    last = recent[-1]
    if last[1] <= first[1] or last[0] <= first[0]:
        return None
    return (last[0] - first[0]) / (last[1] - first[1])


def budget_end_s(budget_left_s: float, batch_s: float | None) -> float:
    """Seconds until a run with a time budget ends, its picks' check included.

    The search sends no batch once less is left than a batch takes plus the
    shortest check of the picks
    (:meth:`farm.jobs.tune_progress.TuneProgress.expired`); the batch in
    flight then ends and the check runs as many rounds as the rest holds
    (:mod:`farm.jobs.tune_check_cost` prices them from this attempt's
    measurements). What stays unused is less than a batch, and the stop falls
    anywhere in the last batch's span, so the run is taken to end half a
    batch before the budget's end. Never below 0 s.

    Args:
        budget_left_s: seconds of the budget left.
        batch_s: seconds a batch takes now; None: none measured yet.

    >>> budget_end_s(200.0, 40.0)
    180.0
    """
    return max(0.0, budget_left_s - (batch_s or 0.0) / 2)


def estimate_eta_s(trials_left: int, measured_s: list[tuple[float, int]],
                   budget_left_s: float | None = None, *, reserve_s: float = 0.0,
                   batch_s: float | None = None) -> float | None:
    """Seconds until the run ends: its trials measured or its budget spent, then the check.

    Args:
        trials_left: trials still asked.
        measured_s: as :func:`seconds_per_trial` takes it.
        budget_left_s: seconds left of the time budget; None: no time budget.
        reserve_s: seconds kept back for the picks' check (0: no check).
        batch_s: seconds a batch takes now (the longest recent one); None: unknown.

    Returns:
        The estimate, or None with no budget before a first trial is measured.

    >>> estimate_eta_s(10, [(0.0, 0), (60.0, 2), (70.0, 4)], reserve_s=5.0)
    55.0
    >>> estimate_eta_s(10, [(0.0, 0), (60.0, 2), (70.0, 4)], budget_left_s=100.0, batch_s=10.0)
    95.0
    >>> estimate_eta_s(10, [(0.0, 0), (60.0, 2), (70.0, 4)], budget_left_s=200.0)
    50.0
    """
    per_trial_s = seconds_per_trial(measured_s)
    trials_s = (None if per_trial_s is None
                else max(trials_left, 0) * per_trial_s + reserve_s)
    if trials_left <= 0:
        trials_s = reserve_s
    if budget_left_s is None:
        return trials_s
    end_s = budget_end_s(budget_left_s, batch_s)
    if trials_s is not None and (trials_s - reserve_s) * CLEAR_MARGIN + reserve_s <= end_s:
        return trials_s
    return min(end_s, trials_s) if trials_left <= 0 and trials_s is not None else end_s
