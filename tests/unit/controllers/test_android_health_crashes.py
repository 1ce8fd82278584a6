"""Counting the app's FATAL EXCEPTIONs across sweeps and farmd restarts."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from farm.controllers.android_health import sample_from_sections
from farm.provision.launch import PACKAGE

AT = datetime(2026, 1, 1, tzinfo=UTC)
FIXTURE = (Path(__file__).parents[2] / "fixtures" / "android"
           / "logcat_crash_fatal_exception__calnotify_emulator.txt")


def logcat(crashes: int) -> str:
    """A logcat with ``crashes`` FATAL EXCEPTIONs of the RPC app (a real capture, renamed)."""
    one = re.sub(r"Process: \S+,", f"Process: {PACKAGE},", FIXTURE.read_text())
    return one * crashes


class TestCrashCount:
    def test_new_crash_is_seen(self) -> None:
        """A logcat with one more crash than counted reports a new one."""
        sample, count = sample_from_sections("s1", AT, {"crash": logcat(2)}, crashes_seen=1)
        assert sample.fatal_exception_seen and count == 2

    def test_first_reading_is_the_baseline(self) -> None:
        """After a farmd (re)start, old crashes in logcat are the baseline, not news."""
        sample, count = sample_from_sections("s1", AT, {"crash": logcat(2)})
        assert not sample.fatal_exception_seen and count == 2

    def test_missing_logcat_keeps_the_count(self) -> None:
        """A sweep without a readable crash section keeps the count; old crashes stay old."""
        sample, count = sample_from_sections("s1", AT, {"app": "42\n"}, crashes_seen=2)
        assert not sample.fatal_exception_seen and count == 2
        again, _ = sample_from_sections("s1", AT, {"crash": logcat(2)}, crashes_seen=count)
        assert not again.fatal_exception_seen
