"""The errors of waiting on a job from Python and from ``farmctl wait``, shared by both."""

from __future__ import annotations

from farm.errors import FarmError

__all__ = ["EXIT_TIMEOUT", "JobFailed", "WaitTimedOut"]

#: ``farmctl wait --timeout``: the job had not ended in time (the code ``timeout(1)`` uses).
EXIT_TIMEOUT = 124


class JobFailed(FarmError):
    """A waited-for job ended failed or cancelled; the message carries the server's reason."""


class WaitTimedOut(FarmError):
    """``farmctl wait --timeout`` ran out before the job ended (exit :data:`EXIT_TIMEOUT`)."""

    exit_code = EXIT_TIMEOUT
