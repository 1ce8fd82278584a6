"""Tests for farm.daemon.Farmd's lifecycle that need no fleet."""

from __future__ import annotations

from pathlib import Path

from farm.config import Settings
from farm.daemon import Farmd
from farm.errors import InfraFault


class _BrokenNotifier:
    def stopping(self, status: str | None = None) -> None:
        raise InfraFault("notify socket gone")


def test_stop_runs_every_step_when_systemd_notify_fails(tmp_path: Path) -> None:
    """A failing STOPPING=1 notification does not keep the parts running."""
    farmd = Farmd(Settings(data_dir=tmp_path))
    farmd.notifier = _BrokenNotifier()  # type: ignore[assignment]
    stopped: list[str] = []
    farmd._stops.append(lambda: stopped.append("store"))
    farmd.stop()
    assert stopped == ["store"]
    assert farmd.stopped.is_set()
