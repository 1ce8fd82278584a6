"""Which phones the pool key offers (farm.fleet.pool.poolable) and its config rule."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from farm.config import Settings, load_config
from farm.errors import ConfigError
from farm.fleet.pool import poolable
from farm.queue.models import DeviceHealth, DeviceState
from farm.queue.records import DeviceRecord
from farm.tvm.relay import Offer
from farm.tvm.tracker import QueueInfo, TrackerSummary

NOW = datetime(2025, 1, 1, tzinfo=UTC)
OFFER = Offer("android-p1", "127.0.0.1", 40001, "android-p1:0.5")
IDLE = TrackerSummary((), (QueueInfo("android-p1", 1, 0),))
READY = DeviceRecord("p1", DeviceState.READY, DeviceHealth.GOOD, False, {}, None, NOW, NOW)


class TestPoolable:
    def test_an_idle_registered_phone_is_offered(self) -> None:
        """Ready, free in the tracker, registered through its relay: offered."""
        assert poolable(READY, set(), OFFER, IDLE)

    @pytest.mark.parametrize("change", [
        {"state": DeviceState.BUSY}, {"state": DeviceState.UNHEALTHY}, {"drained": True},
        {"attempt_id": 7}, {"held_outside": "held outside farm by a session from x"},
    ])
    def test_a_phone_in_use_or_out_of_service_is_not(self, change: dict) -> None:
        """Busy, unhealthy, drained, held by an attempt or a hand session: withdrawn."""
        assert not poolable(dataclasses.replace(READY, **change), set(), OFFER, IDLE)

    def test_reserved_unregistered_or_in_a_session_is_not(self) -> None:
        """Reserved, without a relay registration, in a session (queue empty) or no summary."""
        assert not poolable(READY, {"p1"}, OFFER, IDLE)
        assert not poolable(READY, set(), None, IDLE)
        assert not poolable(READY, set(), OFFER, TrackerSummary((), ()))
        assert not poolable(READY, set(), OFFER, None)


class TestPoolConfig:
    def test_pool_key_may_equal_the_tracker_key(self) -> None:
        """``pool.key = tracker.key`` is fine: farm never requests the bare prefix."""
        assert Settings.model_validate({"pool": {"key": "android"}}).pool.key == "android"

    def test_pool_key_in_farms_namespace_is_refused(self) -> None:
        """A pool key that could equal a phone or job key is a config error naming the rule."""
        with pytest.raises(ConfigError, match="must not start with"):
            load_config(None, env={"FARM_POOL__KEY": "android-job-1"})

    @pytest.mark.parametrize(("key", "why"), [
        ("gpu-job-3", "farm.s tuning jobs"), ("board-job-12", "farm.s tuning jobs"),
        ("board-gpu-job-4", "farm.s tuning jobs"), ("board-rk3588", "a board or GPU"),
        ("gpu-5c3f6d1e", "a board or GPU"),
    ])
    def test_pool_key_of_another_kinds_job_or_device_is_refused(
        self, key: str, why: str, tmp_path: Path
    ) -> None:
        """Job keys of every kind, board and GPU device keys are reserved: one line naming it."""
        config = tmp_path / "farm.toml"
        config.write_text(f'[pool]\nkey = "{key}"\n\n'
                          '[[boards]]\nname = "rk3588"\nhost = "10.0.0.5"\nuser = "farm"\n',
                          encoding="utf-8")
        with pytest.raises(ConfigError) as info:
            load_config(config, env={})
        assert re.fullmatch(f"config: pool key '{key}' is reserved: {why}[^\n]*", str(info.value))

    def test_other_pool_keys_stay_allowed(self) -> None:
        """A key that only looks alike (no job id, not a device's) is still a pool key."""
        settings = Settings.model_validate({"pool": {"keys": {"gpu-fast": {}, "job-3x": {}}}})
        assert set(settings.pool.keys) == {"gpu-fast", "job-3x"}
