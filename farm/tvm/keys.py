"""Tracker keys: how a session reaches one exact phone, or one job's phones.

TVM's tracker matches a request's key exactly (apache/tvm
``python/tvm/rpc/tracker.py``, ``TrackerCode.REQUEST`` -> one
``PriorityScheduler`` per key). So every phone registers under its own key, and
farm asks for that key to measure on that phone; a tuning job relaunches its
phones' apps under the job's key, which only they serve while the job runs.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9]+")


def phone_key(prefix: str, serial: str) -> str:
    """The key ``serial`` registers under, e.g. ``android-127-0-0-1-5555``.

    Only letters, digits and ``-``: the stock app's key field is typed with
    ``input text`` on phones without run-as, and ``:`` separates the tracker's
    own ``server:KEY`` fields.
    """
    return f"{prefix}-{_UNSAFE.sub('-', serial).strip('-')}"


def job_key(prefix: str, job_id: int) -> str:
    """The key a job's phones serve while a tuning job runs, e.g. ``android-job-42``."""
    return f"{prefix}-job-{job_id}"
