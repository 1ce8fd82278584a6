"""Tests for farm.device.logcat."""

import pytest

from farm.device.logcat import Crash, find_fatal_exceptions

PKG = "com.github.quarck.calnotify"
NPE = (
    "java.lang.NullPointerException: Attempt to invoke virtual method "
    "'android.content.res.Configuration android.content.res.Resources.getConfiguration()' "
    "on a null object reference"
)


class TestFindFatalExceptions:
    def test_emulator_crash(self, fixture_text):
        """The crash block gives its time, PID, process and exception line."""
        text = fixture_text("logcat_crash_fatal_exception__calnotify_emulator.txt")
        assert find_fatal_exceptions(text, PKG) == [Crash("04-22 21:34:20.664", 2977, PKG, NPE)]

    def test_other_package(self, fixture_text):
        """Another package's crash is not reported."""
        text = fixture_text("logcat_crash_fatal_exception__calnotify_emulator.txt")
        assert find_fatal_exceptions(text, "org.apache.tvm.tvmrpc") == []

    def test_secondary_process_and_interleaving(self):
        """A ``pkg:remote`` process counts; other PIDs' lines in between do not break the block."""
        head = "01-02 03:04:05.1"
        text = (
            f"{head}00   900   900 E AndroidRuntime: FATAL EXCEPTION: main\n"
            f"{head}00   123   130 I ActivityManager: something else\n"
            f"{head}01   900   900 E AndroidRuntime: Process: org.x:remote, PID: 900\n"
            f"{head}02   900   900 E AndroidRuntime: java.lang.IllegalStateException: boom\n"
        )
        assert find_fatal_exceptions(text, "org.x") == [
            Crash(
                "01-02 03:04:05.100", 900, "org.x:remote", "java.lang.IllegalStateException: boom"
            )
        ]

    def test_quiet_logs(self, fixture_text):
        """Real logs without crashes give an empty list."""
        for name in (
            "logcat_-b_all_-d__mtk_tb8168_android13_head100.txt",
            "logcat_-b_all_-d__mtk_tb8168_android13_system_excerpt.txt",
        ):
            assert find_fatal_exceptions(fixture_text(name), "com.mediatek.camera") == []

    def test_empty(self):
        """Empty logcat output is no crash."""
        assert find_fatal_exceptions("", PKG) == []

    def test_wrong_format(self):
        """Output in another ``-v`` format raises instead of hiding crashes."""
        with pytest.raises(ValueError, match="threadtime"):
            find_fatal_exceptions("E/AndroidRuntime( 900): FATAL EXCEPTION: main\n", PKG)
