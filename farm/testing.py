"""Test helpers that ship with farm: the fleet manager wired as farmd wires it.

Used by farm's own tests and by anyone who tests code on top of farm with
virtual phones (``farm.virtual.testing``). Every part started here is stopped
when the context exits.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from farm import composition
from farm.aio import LoopThread
from farm.clock import SystemClock, wait_until
from farm.config import Settings
from farm.controllers.adb_host import AdbHost
from farm.fleet.manager import FleetManager, FleetOptions
from farm.queue.db import default_url
from farm.queue.models import DeviceState
from farm.queue.store import Store
from farm.tvm.tracker import TrackerProcess, summary


@dataclass
class FleetHarness:
    """A running fleet manager with its store, tracker and the host's adb server.

    ``adb_host.adb`` is the adb client the phones' controller uses, for tests
    of the adb layer itself.
    """

    manager: FleetManager
    store: Store
    tracker: TrackerProcess
    adb_host: AdbHost

    @property
    def tracker_addr(self) -> tuple[str, int]:
        """The tracker's ``(host, port)`` on loopback."""
        return ("127.0.0.1", self.tracker.port)

    def state(self, serial: str) -> DeviceState | None:
        """The phone's state in the store."""
        record = self.store.get_device(serial)
        return record.state if record else None

    def wait_state(self, serials: list[str], state: DeviceState, deadline_s: float) -> None:
        """Wait until every phone is in ``state``.

        Raises:
            AssertionError: not within ``deadline_s``; the message lists the states.
        """
        ok = wait_until(lambda: all(self.state(s) is state for s in serials), deadline_s)
        if not ok:
            raise AssertionError({s: self.state(s) for s in serials})

    def keys(self) -> set[str]:
        """Keys the tracker lists now."""
        return {s.key for s in summary(*self.tracker_addr).servers}

    def sweep_until(self, predicate: Callable[[], bool], deadline_s: float) -> bool:
        """Run health sweeps (farmd's scheduler does every interval) until ``predicate``."""
        def swept() -> bool:
            self.manager.sweep()
            return predicate()

        return bool(wait_until(swept, deadline_s, interval_s=0.5))


@contextlib.contextmanager
def fleet_harness(
    adb_port: int, data_dir: Path, apk: Path | None, *, settings: Mapping[str, Any] | None = None,
    **options: object,
) -> Iterator[FleetHarness]:
    """A tracker, a store and a fleet manager following the adb server on ``adb_port``.

    Wired as farmd wires them (options from :class:`farm.config.Settings`, old
    connections forgotten at start), so a second harness on the same
    ``data_dir`` is a farmd restart.

    Args:
        adb_port: the adb server the phones are attached to.
        data_dir: folder for the database and the tracker's log.
        apk: the signed APK to install (None: use what is installed).
        settings: config sections to change, e.g. ``{"supervise": {...}}``.
        options: :class:`FleetOptions` fields to override (e.g. ``ladder=``).
    """
    with contextlib.ExitStack() as stack:
        tracker = TrackerProcess.start(log_path=data_dir / "tracker.log")
        stack.callback(tracker.stop)
        composition.install()
        store = Store(default_url(data_dir))
        stack.callback(store.close)
        loop = LoopThread()
        stack.callback(loop.close)
        adb_host = AdbHost(adb_port)
        config = Settings.model_validate({
            **(settings or {}), "data_dir": str(data_dir),
            "tracker": {**(settings or {}).get("tracker", {}), "port": tracker.port},
        })
        fleet_options = replace(FleetOptions.from_settings(config, apk=apk),
                                **options)  # type: ignore[arg-type]
        manager = FleetManager(fleet_options, adb_host.android(fleet_options, loop), store,
                               SystemClock())
        stack.callback(manager.close)
        manager.forget_connections("farm started: provisioning again")
        adb_host.track(manager.on_adb_state, debounce_s=0.3, reconcile_interval_s=2.0)
        stack.callback(adb_host.stop_tracking)
        yield FleetHarness(manager, store, tracker, adb_host)


@contextlib.contextmanager
def fresh_postgres_database(base_url: str, prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on ``base_url``'s server, dropped on exit.

    Its name is ``prefix`` plus 12 random hex digits. A database of its own, not
    a schema, where what is tested is per database (the migration's advisory
    lock, LISTEN/NOTIFY between farmd processes). Dropped ``WITH (FORCE)``, so
    connections a killed process left behind do not keep it.

    Args:
        base_url: a SQLAlchemy PostgreSQL URL whose user may ``CREATE DATABASE``
            (tests take it from ``TEST_POSTGRES_URL``).
        prefix: the start of the database's name, e.g. ``"farm_race_"``.

    Yields:
        The new database's URL (``base_url`` with the database replaced,
        password kept).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the server refused or is unreachable.
    """
    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
        try:
            yield sa.engine.make_url(base_url).set(database=name).render_as_string(
                hide_password=False)
        finally:
            with admin.connect() as connection:
                connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        admin.dispose()


def log_events(path: Path, event: str) -> list[dict[str, Any]]:
    """The JSON log lines of ``event`` a process wrote to ``path`` so far (farmd's ``--json-logs``).

    Lines that are not JSON objects (a traceback, a half-written last line) are skipped.
    """
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == event:
                found.append(entry)
    return found
