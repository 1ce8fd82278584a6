"""The regression watch: verdict rows per phone, settled by A/B jobs, the metric, once per job."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from device_states import put_state
from stored_results import NOW, finished_job, timings
from structlog.testing import capture_logs

from farm.clock import FakeClock
from farm.config import Schedule, Settings
from farm.metrics import FarmMetrics
from farm.queue import Store
from farm.queue.models import DeviceState
from farm.queue.records import Outcome
from farm.queue.scheduler import Assignment
from farm.results.watch import RegressionWatch

SPEC = {"kind": "gemm", "params": {"n": 64}, "devices": {"serials": ["P1"]}}
HOUR = timedelta(hours=1)


def _watch(store: Store, baseline: Any, spec: dict[str, Any] = SPEC,
           metrics: FarmMetrics | None = None) -> RegressionWatch:
    settings = Settings(schedules=(Schedule(cron="0 1 * * *", spec=spec, name="nightly",
                                            baseline=baseline),))
    return RegressionWatch(store, settings, FakeClock(start=NOW + 3 * HOUR), metrics)


def _regressions(metrics: FarmMetrics, serial: str = "P1") -> float | None:
    return metrics.registry.get_sample_value(
        "farm_regressions_total", {"serial": serial, "workload": "gemm n=64 float32"})


def finish_ab(store: Store, job_id: int, serial: str, verdict: str, ratio: float = 1.0) -> None:
    """The A/B job ``job_id`` ran on ``serial`` and said ``verdict`` (stored as its kind stores)."""
    put_state(store, serial, DeviceState.READY, "test", NOW + 2 * HOUR)
    [claim] = store.claim([Assignment(job_id, (serial,), 60.0)], NOW + 2 * HOUR)
    figures = {"verdict": verdict, "ratio": ratio, "ci_low": ratio - 0.01,
               "ci_high": ratio + 0.01, "reason": "test"}
    store.finish(claim.attempt.id, Outcome({"kind": "ab", "per_serial": {serial: figures}}),
                 NOW + 2 * HOUR)


def ab_jobs(store: Store) -> list[Any]:
    """The A/B jobs in the queue, oldest first."""
    return sorted((j for j in store.list_jobs(limit=100) if j.kind == "ab"), key=lambda j: j.id)


class TestPrevious:
    def test_a_slower_run_is_suspected_then_confirmed_by_an_ab_job(self, store: Store) -> None:
        """Night 2 10% slower: suspected, an A/B job of both builds; its slower is the build's."""
        night1 = finished_job(store, "P1", timings(1), now=NOW)
        night2 = finished_job(store, "P1", timings(2, median_s=0.011), now=NOW + HOUR)
        metrics = FarmMetrics()
        watch = _watch(store, "previous", metrics=metrics)
        with capture_logs() as logs:
            rows = watch.check()
        assert [(r.job_id, r.baseline_job_id, r.serial, r.verdict) for r in rows] == [
            (night2, night1, "P1", "suspected")]
        [ab] = ab_jobs(store)
        assert ab.spec["params"]["a"]["job"] == night1 and ab.spec["params"]["b"]["job"] == night2
        assert ab.spec["devices"]["serials"] == ["P1"]
        assert not [e for e in logs if e["event"] == "regression_found"]
        assert _regressions(metrics) is None
        assert watch.check() == []  # the A/B job has not ended: nothing settles, none re-enqueued
        assert len(ab_jobs(store)) == 1
        finish_ab(store, ab.id, "P1", "slower", ratio=1.1)
        with capture_logs() as logs:
            [settled] = watch.check()
        assert (settled.job_id, settled.verdict) == (night2, "slower")
        assert settled.confirm_job_id == ab.id
        [found] = [e for e in logs if e["event"] == "regression_found"]
        assert found["confirm_job_id"] == ab.id and found["job_id"] == night2
        assert _regressions(metrics) == 1.0
        assert [(r.job_id, r.confirm_job_id) for r in store.regressions(slower_only=True)] == [
            (night2, ab.id)]

    def test_a_phone_that_was_slow_is_the_phones_finding(self, store: Store) -> None:
        """The A/B of the two builds says no change: the row is 'phone', written to its history."""
        finished_job(store, "P1", timings(1), now=NOW)
        night2 = finished_job(store, "P1", timings(2, median_s=0.011), now=NOW + HOUR)
        metrics = FarmMetrics()
        watch = _watch(store, "previous", metrics=metrics)
        watch.check()
        [ab] = ab_jobs(store)
        finish_ab(store, ab.id, "P1", "no change")
        with capture_logs() as logs:
            [settled] = watch.check()
        assert (settled.job_id, settled.verdict) == (night2, "phone")
        assert not [e for e in logs if e["event"] == "regression_found"]
        [moved] = [e for e in logs if e["event"] == "phone_speed_moved"]
        assert "not the build's" in moved["reason"]
        assert any("not the build's" in e.reason for e in store.device_events("P1"))
        assert _regressions(metrics) is None and store.regressions(slower_only=True) == []

    def test_a_failed_ab_job_leaves_the_verdict_undecided(self, store: Store) -> None:
        """An A/B job that failed settles nothing as slower: the row is undecided."""
        finished_job(store, "P1", timings(1), now=NOW)
        finished_job(store, "P1", timings(2, median_s=0.011), now=NOW + HOUR)
        watch = _watch(store, "previous")
        watch.check()
        [ab] = ab_jobs(store)
        store.cancel(ab.id, NOW + 2 * HOUR)
        [settled] = watch.check()
        assert settled.verdict == "undecided"

    def test_an_unchanged_run_is_recorded_but_not_a_regression(self, store: Store) -> None:
        """Same speed: a 'no change' row, nothing logged as found, the metric not counted."""
        finished_job(store, "P1", timings(1), now=NOW)
        finished_job(store, "P1", timings(2), now=NOW + HOUR)
        metrics = FarmMetrics()
        with capture_logs() as logs:
            rows = _watch(store, "previous", metrics=metrics).check()
        assert [r.verdict for r in rows] == ["no change"]
        assert not [e for e in logs if e["event"] == "regression_found"]
        assert _regressions(metrics) is None and store.regressions(slower_only=True) == []

    def test_each_job_is_judged_once(self, store: Store) -> None:
        """A second check, or a second farmd's watch, writes no second row for a job."""
        finished_job(store, "P1", timings(1), now=NOW)
        finished_job(store, "P1", timings(2, median_s=0.011), now=NOW + HOUR)
        metrics = FarmMetrics()
        assert len(_watch(store, "previous", metrics=metrics).check()) == 1
        assert _watch(store, "previous", metrics=metrics).check() == []
        assert len(store.regressions(slower_only=False)) == 1 and len(ab_jobs(store)) == 1

    def test_previous_is_per_phone(self, store: Store) -> None:
        """Each phone is compared with its own last run of the spec, not another phone's."""
        spec = {"kind": "gemm", "params": {"n": 64}}
        p1 = finished_job(store, "P1", timings(1), now=NOW, pinned=False)
        finished_job(store, "P2", timings(2, median_s=0.02), now=NOW + HOUR, pinned=False)
        new = finished_job(store, "P1", timings(3), now=NOW + 2 * HOUR, pinned=False)
        rows = _watch(store, "previous", spec=spec).check()
        by_job = {r.job_id: (r.baseline_job_id, r.verdict) for r in rows}
        assert by_job[new] == (p1, "no change")

    def test_the_first_run_has_no_baseline(self, store: Store) -> None:
        """A schedule's first run writes nothing and says why, once."""
        finished_job(store, "P1", timings(1), now=NOW)
        watch = _watch(store, "previous")
        with capture_logs() as logs:
            assert watch.check() == [] and watch.check() == []
        assert [e["event"] for e in logs].count("regression_not_checked") == 1

    def test_other_specs_and_old_jobs_are_not_watched(self, store: Store) -> None:
        """Jobs of another spec, or older than the lookback, get no verdict."""
        finished_job(store, "P1", timings(1), now=NOW, n=128)
        finished_job(store, "P1", timings(2), now=NOW + HOUR, n=128)
        assert _watch(store, "previous").check() == []
        finished_job(store, "P1", timings(3), now=NOW - timedelta(days=3))
        finished_job(store, "P1", timings(4), now=NOW - timedelta(days=2))
        assert _watch(store, "previous").check() == []


class TestFixedBaseline:
    def test_every_run_against_one_job(self, store: Store) -> None:
        """baseline = a job id: each run is compared with that job."""
        golden = finished_job(store, "P1", timings(1), now=NOW)
        same = finished_job(store, "P1", timings(2), now=NOW + HOUR)
        slower = finished_job(store, "P1", timings(3, median_s=0.011), now=NOW + 2 * HOUR)
        rows = _watch(store, golden).check()
        assert [(r.job_id, r.baseline_job_id, r.verdict) for r in rows] == [
            (same, golden, "no change"), (slower, golden, "suspected")]  # not golden itself
        [ab] = ab_jobs(store)
        assert (ab.spec["params"]["a"]["job"], ab.spec["params"]["b"]["job"]) == (golden, slower)

    def test_a_missing_baseline_job_is_logged_not_raised(self, store: Store) -> None:
        """A baseline job that does not exist: nothing written, one log line with the reason."""
        finished_job(store, "P1", timings(1), now=NOW)
        with capture_logs() as logs:
            assert _watch(store, 999).check() == []
        [skipped] = [e for e in logs if e["event"] == "regression_not_checked"]
        assert skipped["reason"] == "no job 999"



class TestFarmd:
    def test_farmd_runs_the_watch_every_interval(self, store: Store, tmp_path: Any) -> None:
        """farmd's scheduler has a regression_watch job every [results] watch_interval_s."""
        from apscheduler.triggers.interval import IntervalTrigger

        from farm.daemon import Farmd

        idle = type("Idle", (), {"tick": lambda self: None, "sweep": lambda self: None,
                                 "watch_held": lambda self: None})()
        farmd = Farmd(Settings.model_validate({"data_dir": str(tmp_path),
                                               "results": {"watch_interval_s": 123}}))
        farmd.store, farmd.dispatcher, farmd.manager = store, idle, idle  # type: ignore[assignment]
        farmd._schedule()
        try:
            job = farmd.scheduler.get_job("regression_watch")
            assert job is not None and isinstance(job.trigger, IntervalTrigger)
            assert job.trigger.interval.total_seconds() == 123
        finally:
            farmd.scheduler.shutdown(wait=False)


class TestRecordOnce:
    def test_racing_writers_record_a_job_once(self, store_url: str) -> None:
        """Two stores writing one job's verdicts at the same moment: one wins, rows written once."""
        import threading

        from farm.queue.regressions import RegressionView

        with Store(store_url) as setup:
            base = finished_job(setup, "P1", timings(1), now=NOW)
            job = finished_job(setup, "P1", timings(2), now=NOW + HOUR)
        row = RegressionView(0, job, base, "P1", 1.0, 0.99, 1.01, 0.5, "no change", NOW)
        stores = [Store(store_url) for _ in range(2)]
        barrier = threading.Barrier(2)
        won: list[bool] = []

        def write(store: Store) -> None:
            barrier.wait()
            won.append(store.record_regressions(job, [row]))

        try:
            threads = [threading.Thread(target=write, args=(s,)) for s in stores]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert sorted(won) == [False, True]
            assert len(stores[0].regressions(slower_only=False)) == 1
        finally:
            for store in stores:
                store.close()


class TestUndecided:
    def test_three_samples_a_side_are_suspected_not_no_change(self, store: Store) -> None:
        """Two nightly runs of 3 samples each: suspected with the reason, an A/B job to settle."""
        finished_job(store, "P1", timings(1, n=3), now=NOW)
        night2 = finished_job(store, "P1", timings(2, n=3), now=NOW + HOUR)
        with capture_logs() as logs:
            rows = _watch(store, "previous").check()
        assert [(r.job_id, r.verdict) for r in rows] == [(night2, "suspected")]
        [suspected] = [e for e in logs if e["event"] == "regression_suspected"]
        assert "undecided" in suspected["reason"] and "cannot reach alpha" in suspected["reason"]
        assert store.regressions(slower_only=True) == [] and len(ab_jobs(store)) == 1
