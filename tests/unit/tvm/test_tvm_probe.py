"""Tests for farm.tvm.probe: real sessions through the tracker, with a hard deadline."""

from __future__ import annotations

import os
import signal
import time

import pytest

from farm.errors import NoFreeServer, SessionError, TrackerUnreachable
from farm.tvm.probe import probe_session
from farm.tvm.testing import wait_until
from farm.tvm.tracker import TrackerProcess, free_port, summary


def registered(tracker: TrackerProcess, key: str) -> bool:
    """Whether the tracker lists a server for ``key``."""
    return bool(summary("127.0.0.1", tracker.port).servers_for(key))


class TestProbeSession:
    def test_live_phone_passes(self, tracker: TrackerProcess, phones, key: str) -> None:
        """A registered lan app serves a real session and the data round trip."""
        _, app = phones.start("lan", "10.0.2.2", tracker.port, key)
        assert wait_until(lambda: registered(tracker, key), 30)
        result = probe_session("127.0.0.1", tracker.port, key, timeout_s=30)
        assert (result.server_host, result.server_port) == ("127.0.0.1", app.device_port)
        assert result.roundtrip_ms > 0

    def test_frozen_phone_fails_within_deadline(
        self, tracker: TrackerProcess, phones, key: str
    ) -> None:
        """A SIGSTOPped app stays listed, and the probe fails by its deadline."""
        _, app = phones.start("lan", "10.0.2.2", tracker.port, key)
        assert wait_until(lambda: registered(tracker, key), 30)
        os.killpg(app.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(SessionError) as info:
            probe_session("127.0.0.1", tracker.port, key, timeout_s=4)
        assert time.monotonic() - started < 6
        assert f"127.0.0.1:{app.device_port}" in str(info.value)
        assert registered(tracker, key)

    def test_no_server_for_key(self, tracker: TrackerProcess, key: str) -> None:
        """With nobody registered under the key the probe fails with a clear reason."""
        with pytest.raises(SessionError, match="no server for key") as info:
            probe_session("127.0.0.1", tracker.port, key, timeout_s=3)
        assert isinstance(info.value, NoFreeServer)  # no verdict on any one phone

    def test_unreachable_tracker(self) -> None:
        """A tracker that refuses is an infrastructure fault, not a phone fault."""
        with pytest.raises(TrackerUnreachable):
            probe_session("127.0.0.1", free_port(), "android", timeout_s=20)
