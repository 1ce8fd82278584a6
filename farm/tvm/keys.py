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


#: The device kind (``farm.controllers.ANDROID``) whose job keys start with ``tracker.key``.
PHONE_KIND = "android"


def job_key(prefix: str, job_id: int, kind: str = PHONE_KIND) -> str:
    """The key a job's devices serve while a tuning job runs, e.g. ``android-job-42``.

    The prefix says the devices' kind: phones keep ``prefix`` (``tracker.key``,
    ``android`` by default: ``android-job-42`` as always, so a key stored on a
    phone's hold before an upgrade is still the one its job asks for); other
    kinds use the kind's name (``gpu-job-42``, ``board-job-42``), since
    ``tracker.key`` names phones only.

    Args:
        prefix: ``tracker.key``, the prefix phones register under.
        job_id: the tuning job's id.
        kind: the kind of the job's devices (``farm.controllers``); kinds joined
            by ``-`` (sorted) when one job holds several.
    """
    head = prefix if kind == PHONE_KIND else kind
    return f"{head}-job-{job_id}"
