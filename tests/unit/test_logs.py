"""Tests for farm.logs."""

import io
import json
import subprocess
import sys

import pytest
import structlog
from structlog.testing import capture_logs

from farm import logs


@pytest.fixture(autouse=True)
def _reset_structlog():
    """Leave structlog's global configuration as each test found it."""
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class TestConfigure:
    def test_json_lines_off_a_tty(self):
        """Off a TTY each event is one JSON object with level, ISO UTC time and bound context."""
        out = io.StringIO()
        logs.configure(stream=out)
        with structlog.contextvars.bound_contextvars(serial="emulator-5554", job_id=7):
            structlog.get_logger().info("app_restarted", attempt=2)
        (line,) = out.getvalue().splitlines()
        event = json.loads(line)
        assert event["event"] == "app_restarted"
        assert (event["serial"], event["job_id"], event["attempt"]) == ("emulator-5554", 7, 2)
        assert event["level"] == "info"
        assert event["timestamp"].endswith("Z")

    def test_console_on_a_tty(self):
        """On a TTY events are rendered for people, not as JSON."""
        out = _Tty()
        logs.configure(stream=out)
        structlog.get_logger().warning("lease_expired", job_id=3)
        text = out.getvalue()
        assert "lease_expired" in text
        assert "job_id" in text
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)

    def test_json_forced_on_a_tty(self):
        """json=True wins over TTY detection."""
        out = _Tty()
        logs.configure(json=True, stream=out)
        structlog.get_logger().info("x")
        assert json.loads(out.getvalue())["event"] == "x"

    def test_level_filters(self):
        """Events below the configured level are dropped."""
        out = io.StringIO()
        logs.configure(level="warning", stream=out)
        log = structlog.get_logger()
        log.info("quiet")
        log.error("loud")
        assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["loud"]

    def test_exceptions_are_rendered(self):
        """log.exception puts the traceback into the JSON event."""
        out = io.StringIO()
        logs.configure(stream=out)
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            structlog.get_logger().exception("probe_failed")
        event = json.loads(out.getvalue())
        assert "RuntimeError: boom" in event["exception"]

    def test_bad_level(self):
        """An unknown level name is refused."""
        with pytest.raises(ValueError, match="verbose"):
            logs.configure(level="verbose")

    def test_capture_logs_sees_context(self):
        """Tests can check events by key with capture_logs after configure()."""
        logs.configure(stream=io.StringIO())
        with capture_logs() as captured:
            structlog.get_logger().info("transition", from_state="ready", to_state="cooling")
        assert captured == [
            {
                "event": "transition",
                "from_state": "ready",
                "to_state": "cooling",
                "log_level": "info",
            }
        ]


_FIRST_USE = """
import sys
from farm import logs
log = logs.get_logger("farm.probe")
logs.configure_on_first_use(json=True, level="warning", stream=sys.stderr)
print("structlog" in sys.modules)
log.info("not_shown")
log.warning("first_event", serial="emulator-5554")
"""


class TestConfigureOnFirstUse:
    def test_structlog_loads_and_is_configured_at_the_first_event(self):
        """Nothing loads structlog before a logger is used; the first event is configured."""
        done = subprocess.run([sys.executable, "-c", _FIRST_USE], capture_output=True,
                              text=True, timeout=60, check=True)
        assert done.stdout.strip() == "False"
        (line,) = done.stderr.splitlines()  # info is below the level: only the warning
        event = json.loads(line)
        assert (event["event"], event["serial"], event["level"]) == (
            "first_event", "emulator-5554", "warning")

    def test_loaded_structlog_is_configured_at_once(self):
        """With structlog already imported (farmd, tests) it is configured on the call."""
        out = io.StringIO()
        logs.configure_on_first_use(json=True, stream=out)
        structlog.get_logger().info("direct")
        assert json.loads(out.getvalue())["event"] == "direct"
