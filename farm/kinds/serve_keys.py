"""A tuning attempt's devices serve the job's tracker key while it tunes: the attempt only asks.

MetaSchedule's ``RPCRunner`` asks the tracker for *one* key and measures each
candidate on whichever server of that key is free, so every device of a
tuning attempt must serve the same key, and only they may (TVM's tracker
matches keys exactly: apache/tvm ``python/tvm/rpc/tracker.py``). The key is
:func:`farm.tvm.keys.job_key`, prefixed by the devices' kind (``android-job-42``,
``gpu-job-42``).

The attempt never touches a device: it records what each held device must
serve (``devices.serve_key``, :meth:`farm.queue.store.Store.set_serve_key`, a
compare-and-set on its hold) and farmd's fleet serves it through the device's
controller, and heals a server that dies with the recovery ladder
(:mod:`farm.fleet.serving`). :func:`serving_job_key` around the tuning::

    before   ask for the job key on every device; wait until the tracker lists
             one server per device under it
    during   nothing: a crashed server is farmd's incident; the candidates
             measured while it was down are failed runs and tuning goes on
             (farm.tuning.gemm), or the attempt fails and its retry resumes
    after    (success or failure) ask for each device's own key again; on
             success wait until each is listed, since each device is then timed
             under its own key; count farmd's recovery steps on the devices
             meanwhile (the job's ``app_relaunches``)

When the hold ends in any other way (the attempt's process dies, farmd
reclaims it) the store clears the desired key with the hold, and farmd serves
each device's own key again.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import structlog

from farm.errors import FarmError, PhoneFault
from farm.tvm.keys import PHONE_KIND, job_key
from farm.tvm.tracker import summary

if TYPE_CHECKING:
    from farm.kinds.run import RunContext
    from farm.queue.store import Store

__all__ = ["serving_job_key"]

log = structlog.get_logger(__name__)

SUMMARY_TIMEOUT_S = 5.0
_POLL_S = 0.5
#: Device event rows read per device to count its recovery steps (an incident writes ~6).
_EVENTS = 200


def _listed(ctx: RunContext, key: str) -> int:
    """Servers the tracker lists under ``key`` now; 0 when it does not answer."""
    t = ctx.settings.tracker
    try:
        return len(summary(t.host, t.port, timeout_s=SUMMARY_TIMEOUT_S).servers_for(key))
    except FarmError:
        return 0


def _wait_listed(ctx: RunContext, key: str, count: int, serials: Sequence[str]) -> None:
    """Block until the tracker lists ``count`` servers under ``key``.

    Raises:
        PhoneFault: not within ``jobs.serve_deadline_s`` (names the devices).
    """
    deadline_s = ctx.settings.jobs.serve_deadline_s
    end_s = time.monotonic() + deadline_s
    while (seen := _listed(ctx, key)) < count:
        if time.monotonic() >= end_s:
            raise PhoneFault(",".join(serials), f"{seen} of {count} servers registered as "
                                                f"{key!r} within {deadline_s:g} s")
        time.sleep(_POLL_S)


def _ask(store: Store, ctx: RunContext, serials: Sequence[str], key: str | None) -> None:
    """Record ``key`` as what each device must serve (None: its own key).

    Raises:
        PhoneFault: the attempt no longer holds a device (reclaimed, released).
    """
    for serial in serials:
        if not store.set_serve_key(serial, key, datetime.now(UTC), expect_attempt=ctx.attempt.id):
            raise PhoneFault(serial, f"attempt {ctx.attempt.id} no longer holds it")


def _recoveries(store: Store, serial: str, since: datetime) -> int:
    """Recovery steps farmd's ladder took on ``serial`` since ``since`` (farm.fleet.history)."""
    return sum(1 for event in store.device_events(serial, limit=_EVENTS)
               if event.at >= since and event.reason.startswith("recovery: ")
               and event.reason.endswith(" ok"))


@contextlib.contextmanager
def serving_job_key(ctx: RunContext, serials: Sequence[str],
                    on_relaunch: Callable[[str], None] | None = None) -> Iterator[str]:
    """Have farmd serve the job's key on ``serials`` for the block.

    Args:
        ctx: the attempt; ``ctx.store`` is the queue.
        serials: the devices the attempt holds.
        on_relaunch: called with the serial once per recovery step farmd took
            on it during the block (the runner counts them across attempts,
            farm.tuning.progress).

    Yields:
        The job's tracker key.

    Raises:
        PhoneFault: a device is no longer held, or the servers did not all
            register under the job key (or their own keys afterwards) within
            ``jobs.serve_deadline_s``.
    """
    from farm.kinds.run import device_controller

    store = ctx.store
    if store is None:
        raise PhoneFault(",".join(serials), "tuning needs the queue to ask farmd for the job key")
    kind = "-".join(sorted({ctx.kinds.get(serial, PHONE_KIND) for serial in serials}))
    key = job_key(ctx.settings.tracker.key, ctx.job.id, kind)
    since = datetime.now(UTC)

    def give_back() -> None:
        with contextlib.suppress(FarmError):  # a lost hold: the store cleared it already
            _ask(store, ctx, serials, None)

    try:
        _ask(store, ctx, serials, key)
        _wait_listed(ctx, key, len(serials), serials)
        log.info("tuning_devices_serving", tracker_key=key, serials=list(serials))
        yield key
    except BaseException:
        give_back()
        _count_relaunches(store, serials, since, on_relaunch)
        raise
    give_back()
    try:  # each device is timed under its own key next
        for serial in serials:
            own = device_controller(ctx, serial).tracker_key(serial)
            _wait_listed(ctx, own, 1, [serial])
    finally:
        # Counted once every device serves its own key again: farmd serves it only
        # after a recovery still running when tuning ended wrote its outcome.
        _count_relaunches(store, serials, since, on_relaunch)


def _count_relaunches(store: Store, serials: Sequence[str], since: datetime,
                      on_relaunch: Callable[[str], None] | None) -> None:
    """Call ``on_relaunch(serial)`` once per recovery step farmd took on it since ``since``."""
    relaunches = {serial: _recoveries(store, serial, since) for serial in serials}
    if on_relaunch is not None:
        for serial, count in relaunches.items():
            for _ in range(count):
                on_relaunch(serial)
    log.info("tuning_devices_released_key", relaunches=relaunches)
