"""A migration older farm code cannot read waits until no live host runs such code."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from alembic import command
from queue_helpers import T0

from farm.clock import SystemClock
from farm.errors import StoreError
from farm.queue import Store, db, upgrade_guard
from farm.queue.upgrade_guard import LiveHost, blocking

DEAD_AFTER_S = 60.0


class TestBlocking:
    """The pure judgement over host rows."""

    def test_live_older_or_unknown_hosts_block(self) -> None:
        """Alive and older (or no revision recorded) blocks; dead or as new does not."""
        late = T0 - timedelta(seconds=DEAD_AFTER_S + 1)
        hosts = [LiveHost("old", T0, "0004"), LiveHost("unknown", T0, None),
                 LiveHost("new", T0, "0006"), LiveHost("gone", late, "0004")]
        stuck = blocking(hosts, "0006", T0, DEAD_AFTER_S)
        assert [h.host_id for h in stuck] == ["old", "unknown"]


class TestMigrate:
    """Through :func:`farm.queue.db.migrate`, with revision 0005 flagged as breaking."""

    @pytest.fixture
    def at_0004_with_a_live_old_host(self, store_url: str) -> str:
        """A database at revision 0004 whose host ``old`` (a farm before 0005) beats now."""
        engine = db.create_engine(store_url)
        config = db._alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "0004")
            connection.execute(sa.text(
                "INSERT INTO hosts (host_id, started_at, heartbeat_at, tracker_host, "
                "tracker_port, info) VALUES ('old', :now, :now, '10.0.0.1', 9190, '{}')"),
                {"now": SystemClock().now().replace(tzinfo=None)})
        engine.dispose()
        return store_url

    def test_refused_while_an_older_host_is_alive(
            self, at_0004_with_a_live_old_host: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """Refused naming the host; once its heartbeat is old, the migration runs."""
        monkeypatch.setattr(upgrade_guard, "breaking_revisions", lambda *_a: ["0005"])
        url = at_0004_with_a_live_old_host
        with pytest.raises(StoreError, match=r"migration 0005 changes what older farm hosts "
                                             r"read, and old \(schema before 0005\) still run"):
            Store(url)
        engine = db.create_engine(url)
        with engine.begin() as connection:
            connection.execute(sa.text("UPDATE hosts SET heartbeat_at = :then"),
                               {"then": (SystemClock().now() - timedelta(hours=1)).replace(
                                   tzinfo=None)})
        engine.dispose()
        with Store(url) as store:
            assert [h.host_id for h in store.list_hosts()] == ["old"]

    def test_adding_migrations_do_not_wait(self, at_0004_with_a_live_old_host: str) -> None:
        """0005 only adds columns: it runs while the older host is alive."""
        with Store(at_0004_with_a_live_old_host) as store:
            [host] = store.list_hosts()
            assert host.schema_revision is None
