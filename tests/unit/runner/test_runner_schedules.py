"""Recurring jobs from the config on an APScheduler 3 scheduler."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from apscheduler.schedulers.background import BackgroundScheduler

from farm.clock import FakeClock
from farm.config import Schedule
from farm.errors import ConfigError
from farm.queue import Store
from farm.schedules import install_schedules


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real SQLite queue in tmp_path."""
    with Store(f"sqlite:///{tmp_path / 'farm.db'}") as opened:
        yield opened


NIGHTLY = Schedule(cron="0 1 * * *", spec={"kind": "gemm", "params": {"n": 64}}, name="nightly")


class TestInstallSchedules:
    def test_cron_fires_at_one_in_the_morning(self, store: Store) -> None:
        """A '0 1 * * *' schedule next fires at 01:00 UTC."""
        scheduler = BackgroundScheduler(timezone=UTC)
        [job] = install_schedules(scheduler, [NIGHTLY], store, FakeClock())
        after = datetime(2025, 1, 1, 3, 0, tzinfo=UTC)
        assert job.trigger.get_next_fire_time(None, after) == datetime(2025, 1, 2, 1, 0, tzinfo=UTC)

    def test_firing_enqueues_the_spec(self, store: Store) -> None:
        """Each firing stores one queued job with the schedule's spec."""
        clock = FakeClock()
        [job] = install_schedules(BackgroundScheduler(timezone=UTC), [NIGHTLY], store, clock)
        job_id = job.func(*job.args)
        view = store.get_job(job_id)
        assert view is not None and view.kind == "gemm" and view.spec["params"]["n"] == 64
        assert view.submitted_at == clock.now()

    def test_bad_spec_stops_startup_naming_the_field(self, store: Store) -> None:
        """An invalid spec raises ConfigError naming schedule and field."""
        bad = Schedule(cron="0 1 * * *", spec={"kind": "gemm", "params": {"n": 3}})
        with pytest.raises(ConfigError) as info:
            install_schedules(BackgroundScheduler(timezone=UTC), [NIGHTLY, bad], store, FakeClock())
        assert info.value.key == "schedules.1.spec.params.n"

    def test_reinstalling_replaces_jobs(self, store: Store) -> None:
        """Installing twice (a config reload) keeps one job per schedule."""
        scheduler = BackgroundScheduler(timezone=UTC)
        scheduler.start(paused=True)
        try:
            install_schedules(scheduler, [NIGHTLY], store, FakeClock())
            install_schedules(scheduler, [NIGHTLY], store, FakeClock())
            assert [j.id for j in scheduler.get_jobs()] == ["farm-schedule:nightly"]
        finally:
            scheduler.shutdown(wait=False)
