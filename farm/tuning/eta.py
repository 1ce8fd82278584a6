"""The seconds a tune job has left: the arithmetic behind ``eta_s``.

The ETA is that of the job's result, as its user waits for it: the search
left, then the picks' check (:mod:`farm.tuning.check_cost`), then the
tuned build and its timing on each phone (:mod:`farm.tuning.tail`). A
tuning run's search ends either when its trials are measured or when its
time budget (``--for``) is spent. The search left is priced task by task
(:func:`search_left_s`): each batch still to send costs its task's search
(the evolutionary search and the cost model's ranking, :class:`TaskCost`)
and the task scheduler's gap between batches, each trial left its task's
build and run. A global rate of recent batches was -72% to +319% off without
a budget (docs/benchmarks.md's history): early on it was the rate of the default
schedules, later that of the last batches, smaller once tasks reached their
cap. A search before the cost model predicts (its warm-up: the round's
first tenth of the trials) only samples a batch, a small part of what later
ones cost, so a task's cold searches are priced :data:`SAMPLED_GROWTH` times
as long (:data:`FIRST_BATCH_GROWTH` where the warm-up is not known and a
task's first search is its cold one) until the run shows its own ratio
(:func:`farm.tuning.batches.growth`); a batch's runs hide behind the next
tasks' searches and pile up on the last task's, so a task's candidates cost
the mean of the round robin's until its second batch;
and a task whose search runs dry has few trials left, whatever it asked
(:func:`dry_left`). So:

- before a first batch is built, the search's cost is unknown: no ETA
  without a budget (:func:`estimate_eta_s` gives None), the budget's end
  with one once even the default schedules' rate cannot fit the trials left;
- with a time budget, the search is taken to end with the budget (less half
  a batch, what it ends short by: :func:`budget_end_s`) unless the search
  left ends first by a wide margin (:data:`CLEAR_MARGIN`);
- without one, the search left plus the picks' check;
- then the tuned build and the timing (:class:`farm.tuning.progress.TuneProgress`
  adds them).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

__all__ = ["CLEAR_MARGIN", "DRY_RATIO", "EMPTY_SEARCHES", "FIRST_BATCH_GROWTH", "RECENT_BATCHES",
           "SAMPLED_GROWTH", "TaskCost", "budget_end_s", "dry_left", "estimate_eta_s",
           "search_left_s", "seconds_per_trial"]

#: Measured batches whose rate counts (the last ones): the rate slows as a run goes on.
RECENT_BATCHES = 4

#: A task's warm searches (the cost model predicting) take this many times its cold ones, until
#: a task of the run shows its own ratio (:meth:`farm.tuning.batches.BatchTimes.task_cost`).
#: They took 1.3x to 2.2x (median 1.5x) on the small CNN's tasks, 300 trials on one virtual
#: phone, and 1.2x to 2.1x with 1000 trials (docs/benchmarks.md's history, issue 21).
FIRST_BATCH_GROWTH = 1.5

#: A task's warm searches take this many times its cold ones where a cold search only samples a
#: batch (:func:`farm.tuning.search.FarmSearch` while the cost model scores at random), until a
#: task of the run shows its own ratio: 81x to 117x for the small CNN's tasks at 500 trials
#: (convs 9.3-9.9 s against 0.08-0.09 s, its max pool 5.7 s against 0.07 s; 2-core host,
#: 2026-12-04, load 2.1-2.7).
SAMPLED_GROWTH = 110.0

#: The search left decides the ETA of a run with a time budget only when it would still end
#: inside it at this many times its price (the search slows as the records grow).
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
    (:meth:`farm.tuning.progress.TuneProgress.expired`); the batch in
    flight then ends and the check runs as many rounds as the rest holds
    (:mod:`farm.tuning.check_cost` prices them from this attempt's
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


@dataclass(frozen=True)
class TaskCost:
    """What one task's search has left, and what its batches will cost.

    Attributes:
        trials_left: trials asked less trials measured (a batch in flight included).
        in_flight: candidates of its batch sent and not yet measured (0: none).
        search_s: seconds a search of its batches costs (the evolutionary
            search and the cost model's ranking, from the batch's start to its
            candidates): the mean of its recent searches after its first, or
            its first at the run's growth (:class:`farm.tuning.batches.BatchTimes`);
            None before one ended.
        measure_s: seconds a candidate of its batches costs from its search's
            end to its result (build, upload and run, a batch's own time:
            :meth:`farm.tuning.progress.TuneProgress.batch_joined`): its
            recent batches' after its first, or the mean of the tasks' first
            batches'; None before a batch of it was measured.
        batches_left: searches it has left where its trials do not say
            (a task running dry: :func:`dry_left`); None: its trials left in
            batches.
    """

    trials_left: int
    in_flight: int = 0
    search_s: float | None = None
    measure_s: float | None = None
    batches_left: int | None = None


#: The most a running-dry task's next batch is taken to give of its last (:func:`dry_left`).
DRY_RATIO = 0.75

#: Searches in a row that give nothing new (all measured before) before a task ends
#: (:func:`farm.tuning.search.FarmSearch`).
EMPTY_SEARCHES = 5


def dry_left(yields: list[int], batch: int) -> tuple[int, int] | None:
    """The trials and searches left to a task whose search runs dry; None while it does not.

    MetaSchedule's search offers only candidates not yet measured, so a task
    with a small space (a pool) gets short batches and then none: on the
    small CNN's 1000-trial run the max pool's batches gave 16 five times, then
    10, 6, 5, 2, 1 and 0 (89 of its 250 trials), and its trials left priced in
    whole batches put the ETA +23% to +55% over in the run's last third. Once
    a batch comes short, the yields are taken to shrink at the ratio of the
    last two (3/4 at most) until less than one is left, and then
    :data:`EMPTY_SEARCHES` searches come up empty before the task ends
    (:func:`farm.tuning.search.FarmSearch`).

    Args:
        yields: the candidates each of the task's searches gave, in order.
        batch: the candidates a search asks for.

    Returns:
        ``(trials, searches)`` left.

    >>> dry_left([16, 16, 10], 16), dry_left([16, 8, 8], 16), dry_left([16, 16], 16)
    ((17, 10), (24, 13), None)
    >>> dry_left([16, 2, 0], 16), dry_left([16, 0, 0], 16)
    ((0, 4), (0, 3))
    """
    if not yields or yields[-1] >= batch:
        return None
    if yields[-1] == 0:
        empty = len(list(itertools.takewhile(lambda n: n == 0, reversed(yields))))
        return 0, max(0, EMPTY_SEARCHES - empty)
    last = yields[-1]
    before = yields[-2] if len(yields) > 1 else batch
    ratio = min(DRY_RATIO, last / before) if before > 0 else DRY_RATIO
    shrinking = math.ceil(math.log(last) / math.log(1 / ratio)) if last > 1 else 0
    return round(last * ratio / (1 - ratio)), shrinking + EMPTY_SEARCHES


def search_left_s(tasks: list[TaskCost], batch: int, default_measure_s: float | None = None,
                  *, gap_s: float = 0.0) -> float | None:
    """Seconds the search has left: each task's batches to send and trials to measure, priced.

    A task's batches left are its trials left not in flight, in batches of
    ``batch``; each costs its task's search (the tasks' mean where it has none
    yet: the round robin searches every task once early on) and the task
    scheduler's gap between batches. Each trial left costs its task's
    measurement (the mean over the tasks measured so far, else
    ``default_measure_s``).

    Args:
        tasks: every task of the run, finished ones included (0 trials left).
        batch: candidates per batch (the largest sent so far).
        default_measure_s: seconds per trial before a batch was measured; None: unknown.
        gap_s: seconds between a batch's results and the next search (0: none seen).

    Returns:
        The seconds, or None before a first search has ended (or with nothing to
        price a measurement by) while trials are left.

    >>> search_left_s([TaskCost(16, 0, 4.0, 0.5), TaskCost(8)], 8)  # 2 x 4 + 8, then 4 + 4
    24.0
    >>> search_left_s([TaskCost(0)], 8), search_left_s([TaskCost(5)], 8) is None
    (0.0, True)
    >>> search_left_s([TaskCost(0, 0, 2.0, 0.5, batches_left=3)], 8)  # a dry task's empty searches
    6.0
    """
    left = [t for t in tasks if t.trials_left > 0 or t.batches_left]
    if not left:
        return 0.0
    searches = [t.search_s for t in tasks if t.search_s is not None]
    measures = [t.measure_s for t in tasks if t.measure_s is not None]
    measure_s = sum(measures) / len(measures) if measures else default_measure_s
    if not searches or measure_s is None:
        return None
    search_s = sum(searches) / len(searches)
    return sum(
        (math.ceil(max(0, t.trials_left - t.in_flight) / max(batch, 1))
         if t.batches_left is None else t.batches_left)
        * ((search_s if t.search_s is None else t.search_s) + gap_s)
        + t.trials_left * (measure_s if t.measure_s is None else t.measure_s)
        for t in left)


def estimate_eta_s(search_s: float | None, budget_left_s: float | None = None, *,
                   check_s: float = 0.0, batch_s: float | None = None,
                   at_least_s: float = 0.0) -> float | None:
    """Seconds until the run ends: its search done or its budget spent, then the check.

    Args:
        search_s: seconds the search has left (:func:`search_left_s`); None: unknown.
        budget_left_s: seconds left of the time budget; None: no time budget.
        check_s: seconds the picks' check takes after the search (0: no check).
        batch_s: seconds a batch takes now (the longest recent one); None: unknown.
        at_least_s: seconds the search has left at the least (the trials left at
            the default schedules' rate), to tell while ``search_s`` is unknown
            whether the budget ends first anyway.

    Returns:
        The estimate, or None while the search's cost is unknown and the budget
        (if any) may not be what ends the run.

    >>> estimate_eta_s(50.0, check_s=5.0), estimate_eta_s(None) is None
    (55.0, True)
    >>> estimate_eta_s(50.0, 100.0, batch_s=10.0), estimate_eta_s(20.0, 100.0)
    (95.0, 20.0)
    >>> estimate_eta_s(None, 100.0, at_least_s=120.0), estimate_eta_s(None, 100.0) is None
    (100.0, True)
    """
    if budget_left_s is None:
        return None if search_s is None else search_s + check_s
    end_s = budget_end_s(budget_left_s, batch_s)
    if search_s is not None and search_s * CLEAR_MARGIN + check_s <= end_s:
        return search_s + check_s
    if search_s is None and at_least_s + check_s < end_s:
        return None
    return min(end_s, check_s) if search_s == 0 else end_s
