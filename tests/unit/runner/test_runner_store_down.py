"""An attempt's child started while the database server is down waits for it, then hands back."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.clock import SystemClock
from farm.config import DatabaseSettings, JobSettings, Settings
from farm.errors import Retry, StoreUnreachable
from farm.netaddr import free_port
from farm.queue import Store
from farm.queue.records import Failure
from farm.runner.child import EXIT_FAILED, open_store, run_attempt
from farm.runner.outcome import read_outcome


def _down_url() -> str:
    """A PostgreSQL URL on a loopback port nothing listens on."""
    return f"postgresql+psycopg://farm@127.0.0.1:{free_port()}/farm"


class TestUnreachable:
    """A server that refuses connections is named unreachable, not a migration's fault."""

    def test_opening_a_store_on_a_server_that_is_down(self) -> None:
        """Store() says the database is unreachable and why, not "cannot migrate"."""
        url = _down_url()
        with pytest.raises(StoreUnreachable) as info:
            Store(url)
        assert str(info.value).startswith(f"database {url} is unreachable: connection failed")
        assert "cannot migrate" not in str(info.value)
        assert "\n" not in str(info.value)


class TestOpenStore:
    """open_store tries again while the server cannot be reached."""

    def test_a_server_back_within_the_wait_is_used(self, tmp_path: Path) -> None:
        """Two refusals, then the store opens: the attempt goes on."""
        calls: list[int] = []

        def opener() -> Store:
            calls.append(1)
            if len(calls) < 3:
                raise StoreUnreachable("database postgresql://db/farm is unreachable: refused")
            return Store(f"sqlite:///{tmp_path / 'farm.db'}")

        with open_store(opener, 30, SystemClock(), retry_s=0.01) as store:
            assert store.list_jobs() == []
        assert len(calls) == 3

    def test_the_default_wait_is_inside_the_lease(self) -> None:
        """farmd heartbeats the attempt while its child waits: the wait stays inside the lease."""
        assert 0 < DatabaseSettings().unreachable_wait_s < JobSettings().lease_s


class TestRunAttempt:
    """A child that never reaches the server hands its attempt back, costing no try."""

    def test_the_outcome_says_unreachable_and_is_an_outage(self, tmp_path: Path) -> None:
        """outcome.json names the database as unreachable; its kind is handed back uncounted."""
        url = _down_url()
        settings = Settings(data_dir=tmp_path, database_url=url,
                            database={"unreachable_wait_s": 0.05})
        assert run_attempt(settings, 1, 1, tmp_path / "run") == EXIT_FAILED
        outcome = read_outcome(tmp_path / "run")
        assert outcome is not None and not outcome.committed
        assert outcome.error_kind == "StoreUnreachable"
        assert outcome.message is not None
        assert outcome.message.startswith(f"database {url} is unreachable: ")
        assert outcome.message.endswith("(tried for 0.05 s)")
        assert Failure(outcome.error_kind, Retry.SAME_LIMIT, outcome.message).infra
