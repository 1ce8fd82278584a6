"""What the dashboard shows that the API's routes do not carry: read-only JSON views.

Devices, jobs and their results come to the pages from the API's own routes
(``/api/v1/devices``, ``/api/v1/jobs...``: one serializer, :mod:`farm.api.schemas`).
These views add each device's latest incidents, ``farmctl compare --json``'s
report and a workload's history (a tuning job's are in :mod:`farm.web.tune_view`),
built from the serializers farmctl's ``--json`` uses, so they look the same in
the CLI and the browser. Every view is plain data (JSON types only):
:mod:`farm.web.data` serves it.
"""

from __future__ import annotations

from typing import Any

from farm.config import Settings
from farm.errors import UserFault
from farm.jsonable import plain
from farm.queue.store import Store
from farm.results.compare import compare_refs
from farm.results.rows import sample_rows
from farm.results.spreads import PhoneSpread, by_workload, noise_label, phone_spreads

__all__ = ["compare_view", "history_view", "incidents_view"]


def _spread_json(figure: PhoneSpread) -> dict[str, Any]:
    """One phone's spread (numbers in the figure's unit) and its noise label."""
    return {**plain(figure.flat()), "noise": noise_label(figure)}


def incidents_view(store: Store, settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """Each device's newest ``[web] incidents`` events, newest first, by serial.

    Returns:
        ``{serial: [{"at", "from_state", "to_state", "reason"}, ...]}``.
    """
    limit = settings.web.incidents
    return {record.serial: [
        {"at": plain(e.at), "from_state": e.from_state, "to_state": e.to_state,
         "reason": e.reason} for e in store.device_events(record.serial, limit=limit)
    ] if limit else [] for record in store.list_devices()}


def compare_view(store: Store, settings: Settings, a: str, b: str) -> dict[str, Any]:
    """``farmctl compare A B --json`` with the configured threshold and alpha.

    Raises:
        UserFault: as :func:`farm.results.compare.compare_refs` (unknown or
            unfinished job or run, different workloads).
    """
    report = compare_refs(store, a, b, threshold=settings.results.change_threshold,
                          alpha=settings.results.alpha, max_cv=settings.results.max_cv)
    return report.to_json()


def history_view(store: Store, settings: Settings, workload: str | None) -> dict[str, Any]:
    """A workload's per-phone figures over time (``farmctl results --history``).

    Returns:
        ``{"workloads": [label...], "workload", "phones": [spread...]}``: every
        workload of the newest ``[web] history_limit`` results, and the chosen
        one's figures oldest first (none when ``workload`` is None).

    Raises:
        UserFault: ``workload`` has no results among them.
    """
    figures = phone_spreads(sample_rows(store, limit=settings.web.history_limit),
                            settings.results.max_cv)
    known = sorted({f.workload for f in figures})
    if workload is not None and workload not in known:
        raise UserFault(f"no results of workload {workload!r} in the newest "
                        f"{settings.web.history_limit} (known: {', '.join(known) or 'none'})")
    chosen = by_workload(figures, workload) if workload is not None else []
    return {"workloads": known, "workload": workload,
            "phones": [_spread_json(f) for f in chosen]}
