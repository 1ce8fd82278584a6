"""The regression watch's second look: an A/B job of the two builds settles a suspected change.

Two scheduled runs taken hours apart see the phone's drift (heat, other load,
the governor): judged by each side's spread, a real slowdown can read
undecided, and a phone that was slow during one run reads as a regression of
the build. So the watch (:mod:`farm.results.watch`) writes every verdict
other than a steady "no change" as ``suspected`` and hands it here:

1. :meth:`Confirmations.enqueue` enqueues an A/B job (:mod:`farm.kinds.ab`)
   of the baseline job's build (A) against the new job's (B), pinned to the
   phone, and names it on the row (compare and set, once);
2. once that job has ended, :meth:`Confirmations.settle` moves the row to
   its final verdict (compare and set on ``suspected``): the A/B's slower,
   faster or undecided; or ``phone`` when the A/B found no change, since the
   two builds then run alike and the phone's speed moved between the runs.

A ``phone`` verdict is a finding about the phone, not the build: it is written
to the phone's history (``farmctl logs``) and logged as ``phone_speed_moved``.
Only a confirmed ``slower`` logs ``regression_found`` and counts
``farm_regressions_total``.

The A/B job builds the baseline from its job's spec: a GEMM's parameters, a
model's stored blob (kept for good) and the tuning records it named; the
compile cache hands back the library the baseline ran while it keeps it.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from farm.clock import Clock
from farm.errors import FarmError
from farm.kinds import kind_of
from farm.metrics import FarmMetrics
from farm.queue.models import JobState
from farm.queue.records import JobView
from farm.queue.regressions import RegressionView
from farm.queue.store import Store
from farm.results.ab import ab_phones

__all__ = ["PHONE", "Confirmations", "ab_spec"]

log = structlog.get_logger(__name__)

#: The final verdict of a suspected change whose A/B job found no change: the phone's.
PHONE = "phone"


def ab_spec(row: RegressionView) -> dict[str, object]:
    """The A/B job that settles ``row``: its baseline's build against its job's, on its phone."""
    return {"kind": "ab", "params": {"a": {"job": row.baseline_job_id}, "b": {"job": row.job_id}},
            "devices": {"serials": [row.serial]}}


class Confirmations:
    """Enqueues and reads the A/B jobs of suspected verdicts; see the module doc.

    Args:
        store: the queue.
        data_dir: farm's data folder (a tune job's records, when a side names one).
        clock: the time of the jobs and events.
        metrics: where confirmed regressions are counted; None counts nothing.
    """

    def __init__(self, store: Store, data_dir: Path, clock: Clock,
                 metrics: FarmMetrics | None = None) -> None:
        self.store = store
        self.data_dir = Path(data_dir)
        self.clock = clock
        self.metrics = metrics

    def can_confirm(self, job: JobView) -> bool:
        """Whether an A/B job can time ``job``'s build (a gemm, a model, a model's tuning)."""
        from farm.kinds.ab_builds import AbBuild, resolve

        try:
            resolve(AbBuild(job=job.id), "cpu", self.store, "params.b")
        except FarmError:
            return False
        return True

    def check(self) -> list[RegressionView]:
        """Enqueue the missing A/B jobs, settle the ended ones; returns the rows settled."""
        settled = []
        for row in self.store.suspected_regressions():
            if row.confirm_job_id is None:
                self.enqueue(row)
                continue
            job = self.store.get_job(row.confirm_job_id)
            if job is not None and job.state.ended and (done := self.settle(row, job)):
                settled.append(done)
        return settled

    def enqueue(self, row: RegressionView) -> int | None:
        """Enqueue ``row``'s A/B job and name it on the row; None if it cannot be made.

        A row whose A/B job cannot be enqueued (its baseline's spec no longer
        reads) is settled ``undecided`` with the reason logged.
        """
        from farm.kinds.ab import AbJob, check
        from farm.queue.spec import parse_spec

        now = self.clock.now()
        raw = ab_spec(row)
        try:
            spec = parse_spec(raw)
            if isinstance(spec, AbJob):
                check(spec, self.store, self.data_dir)
            job_id = self.store.enqueue(raw, now)
        except FarmError as exc:
            if self.store.settle_regression(row.id, "undecided"):
                log.warning("regression_undecided", job_id=row.job_id,
                            baseline_job_id=row.baseline_job_id, serial=row.serial,
                            reason=f"no A/B job could be made: {exc}")
            return None
        if not self.store.attach_confirmation(row.id, job_id):
            self.store.cancel(job_id, now)  # another farmd named its own first
            return None
        log.info("regression_confirming", job_id=row.job_id, baseline_job_id=row.baseline_job_id,
                 serial=row.serial, confirm_job_id=job_id)
        return job_id

    def settle(self, row: RegressionView, ab: JobView) -> RegressionView | None:
        """Move ``row`` to the verdict of its ended A/B job ``ab``; None if another farmd did."""
        figures = {}
        if ab.state is JobState.SUCCEEDED:
            results = self.store.results(ab.id, limit=1)
            phones = ab_phones(results[0].summary) if results else []
            figures = next((p for p in phones if p["serial"] == row.serial), {})
        verdict = str(figures.get("verdict") or "undecided")
        final = PHONE if verdict == "no change" else verdict
        if not self.store.settle_regression(row.id, final):
            return None
        self._tell(row, final, ab, figures)
        return RegressionView(row.id, row.job_id, row.baseline_job_id, row.serial, row.ratio,
                              row.ci_low, row.ci_high, row.p_value, final, row.created_at,
                              ab.id)

    def _tell(self, row: RegressionView, final: str, ab: JobView,
              figures: dict[str, object]) -> None:
        """Log the settled verdict; a phone's finding goes to its history too."""
        fields = {"job_id": row.job_id, "baseline_job_id": row.baseline_job_id,
                  "serial": row.serial, "confirm_job_id": ab.id, "runs_ratio": row.ratio,
                  "ab_ratio": figures.get("ratio"), "ab_ci_low": figures.get("ci_low"),
                  "ab_ci_high": figures.get("ci_high")}
        if final == "slower":
            log.warning("regression_found", **fields)
            job = self.store.get_job(row.job_id)
            if self.metrics is not None and job is not None:
                self.metrics.count_regression(row.serial, kind_of(job.kind).workload(job.spec))
        elif final == PHONE:
            reason = (f"its timings moved {row.ratio - 1:+.1%} between jobs "
                      f"{row.baseline_job_id} and {row.job_id}, but A/B job {ab.id} of the two "
                      "builds found no change: the phone's speed moved, not the build's")
            log.warning("phone_speed_moved", **fields, reason=reason)
            self.store.add_device_event(row.serial, reason, self.clock.now())
        elif final == "undecided":
            why = figures.get("why") or f"A/B job {ab.id} {ab.state.value}: {ab.error or ''}"
            log.warning("regression_undecided", **fields, reason=why)
        else:
            log.info("regression_settled", **fields, verdict=final)
