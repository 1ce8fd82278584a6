"""Reservations with farmd and virtual phones: a reserved phone gets no job until it expires."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from click.testing import CliRunner

from farm.cli.main import cli
from farm.clock import wait_until
from farm.queue.models import JobState
from farm.queue.waiting import wait_reasons

JOB_DEADLINE_S = 240.0
RESERVE_FOR_S = 40
TINY_GEMM = {"kind": "gemm", "params": {"n": 16, "number": 1, "repeat": 3}}


def farmctl(running: Any, *args: str) -> str:
    """Run ``farmctl`` on farmd's data folder and queue; returns its stdout."""
    farmd = running.farmd
    config = farmd.data_dir.parent / "farmctl.toml"
    config.write_text(f'data_dir = "{farmd.data_dir}"\n'
                      f'database_url = "{farmd.settings.database_url}"\n'
                      f'[tracker]\nport = {farmd.settings.tracker.port}\n')
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


class TestReservedPhone:
    def test_gets_no_job_while_others_do_and_takes_jobs_after_expiry(
        self, start_farmd: Callable[..., Any]
    ) -> None:
        """Jobs run on the free phone; one pinned to the reserved phone waits, then runs."""
        # farmd ends the reservation at its next look after the end (every 30 s by
        # default): each second here, so the test waits out the 40 s, not a look too.
        running = start_farmd(2, reservations={"expire_interval_s": 1.0})
        store = running.store
        reserved, free = running.serials
        view = json.loads(farmctl(running, "reserve", reserved, "--for", f"{RESERVE_FOR_S}s",
                                  "--owner", "alice", "--json"))
        assert view["tracker_port"] == running.farmd.settings.tracker.port
        assert view["tracker_key"] == running.farmd.manager.runtime(reserved).key
        until = store.reservations()[0].expires_at

        pinned = running.enqueue({**TINY_GEMM, "devices": {"serials": [reserved]}})
        anywhere = [running.enqueue(TINY_GEMM) for _ in range(3)]
        reason = wait_reasons(store.snapshot(), until - timedelta(seconds=1))[pinned]
        assert reason.startswith("the only match is reserved by alice until ")
        running.wait_finished(anywhere)
        for job_id in anywhere:
            assert store.get_job(job_id).state is JobState.SUCCEEDED  # type: ignore[union-attr]
            assert [list(a.serials) for a in store.attempts(job_id)] == [[free]]
        assert store.attempts(pinned) == [] or store.attempts(pinned)[0].started_at >= until

        running.wait_finished([pinned])
        assert store.get_job(pinned).state is JobState.SUCCEEDED  # type: ignore[union-attr]
        (attempt,) = store.attempts(pinned)
        assert list(attempt.serials) == [reserved] and attempt.started_at >= until
        wait_until(lambda: store.reservations() == [], 60.0, "farmd ended the reservation")
        ended = store.reservations(active=False)
        assert [(r.serial, r.end_reason) for r in ended] == [(reserved, "expired")]
