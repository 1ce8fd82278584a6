"""An A/B job's page data: each phone's verdict and the ratio B/A of every round.

The verdict rows are :func:`farm.results.ab.ab_phones`'s, as ``farmctl job``
and ``farmctl results`` print them. The rounds come from the raw samples: the
``ab`` kind stores each round's two timings with their build (``arm``) and
round (:mod:`farm.kinds.ab`), and the flat rows (:func:`farm.results.rows.sample_rows`)
pair each sample with the phone's reading taken last before its round, so a
round's ratio can be set beside the phone's temperature.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from farm.health.readings import result_readings
from farm.queue.store import Store
from farm.results.ab import ab_phones, is_ab
from farm.results.pairing import result_columns
from farm.results.rows import SampleRow, sample_rows

__all__ = ["ab_view", "round_rows"]


def _finite(value: Any) -> Any:
    """``value``, or None for a float that JSON cannot carry (NaN, infinity)."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _number(value: Any) -> float | None:
    """A summary's figure as a finite float; None where it is none (another farm version's)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return _finite(float(value))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def round_rows(rows: list[SampleRow], serial: str) -> list[dict[str, Any]]:
    """One phone's rounds in order: both builds' timings, the ratio B/A and the reading before.

    Returns:
        ``[{"round", "a_s", "b_s", "ratio", <reading>...}]``: timings in
        seconds (None for a build the round lacks), ``ratio`` is ``b_s / a_s``
        (None unless both are above zero), and each reading declared
        ``with_results`` by name (a phone's battery temperature, °C, and
        Android thermal status), taken last before the round.
    """
    by_round: dict[int, dict[str, SampleRow]] = defaultdict(dict)
    for row in rows:
        if row.serial == serial and row.round is not None and row.arm in ("a", "b"):
            by_round[row.round][row.arm] = row
    out = []
    for index, arms in sorted(by_round.items()):
        a, b = arms.get("a"), arms.get("b")
        a_s, b_s = (_finite(r.value) if r is not None else None for r in (a, b))
        either = a or b
        out.append({
            "round": index, "a_s": a_s, "b_s": b_s,
            "ratio": _finite(b_s / a_s) if a_s is not None and b_s is not None
            and a_s > 0 and b_s > 0 else None,
            **{r.name: either.readings.get(r.name) if either else None
               for r in result_readings()},
        })
    return out


def ab_view(store: Store, job_id: int) -> dict[str, Any]:
    """An A/B job's sides, rule and per-phone verdicts with their rounds, from its newest result.

    Returns:
        ``{"a", "b", "threshold", "confidence", "method", "phones", "readings"}``: the
        builds' labels, the smallest change that counts (0.05 = 5%), the
        interval's confidence (0.99), how the verdict is reached, and per phone
        (by serial) the :func:`~farm.results.ab.ab_phones` row with
        ``per_round`` (:func:`round_rows`); ``readings`` heads the rounds'
        reading columns (:func:`~farm.results.pairing.result_columns`).
        Figures JSON cannot carry are None.
        Every value None and no phones for a job without an A/B result.

    Raises:
        StoreError: the database cannot be read.
    """
    results = store.results(job_id, limit=1)
    summary: Mapping[str, Any] = results[0].summary if results else {}
    if not is_ab(summary):
        return {"a": None, "b": None, "threshold": None, "confidence": None, "method": None,
                "phones": [], "readings": result_columns()}
    rows = sample_rows(store, job_ids=[job_id])
    phones = [{**{k: _finite(v) for k, v in phone.items()},
               "per_round": round_rows(rows, phone["serial"])} for phone in ab_phones(summary)]
    return {"a": _text(summary.get("a")), "b": _text(summary.get("b")),
            "threshold": _number(summary.get("threshold")),
            "confidence": _number(summary.get("confidence")),
            "method": _text(summary.get("method")), "phones": phones,
            "readings": result_columns()}
