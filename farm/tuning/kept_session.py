"""One RPC session per runner worker, kept across the candidates it measures.

MetaSchedule's ``RPCRunner`` opens a session for every candidate
(``_worker_func``, apache/tvm ``python/tvm/s_tir/meta_schedule/runner/
rpc_runner.py``): a tracker request, a connection and, on the phone, a fresh
server process with the default thread pool. On the 2-core host that took
0.11 s of a 2 us kernel's 0.23 s candidate (its three timed repeats of 20 ms
take 0.10 s), so a phone measuring the small CNN's candidates was idle half
of the time it was held. :class:`KeptSession` is the runner's
``f_create_session``: each worker process keeps the session it opened and
hands it to its next candidate, after a round trip that proves it alive
(``runtime.NumThreads``); a dead one (the phone's app restarted, a candidate
crashed its server) is replaced by a new one. :func:`kept_cleanup` is the
runner's ``f_cleanup``: it marks the session idle instead of removing the
session's folder (``session.remove("")``, MetaSchedule's default), which a
kept session still uses.

A kept session holds its phone: the tracker gives no other client that
phone while it is open. So a session idle for :data:`IDLE_S` (between
rounds, while the job builds its tuned model or times it) is closed by the
worker's closer thread, and one older than half its ``session_timeout_sec``
is replaced before the server's timeout would end it under a candidate's run.

Each candidate's library gets its own name on the phone
(:func:`remote_name`) and is removed once loaded: a kept session's server
process would otherwise find a library of the same path still loaded
(``dlopen`` hands back the old one) whenever an earlier candidate's module
outlived its run in a reference cycle.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["IDLE_S", "KeptSession", "kept_cleanup", "remote_name"]

#: Seconds a kept session may stay idle before its worker closes it and frees the phone.
IDLE_S = 2.0


@dataclass
class _Kept:
    """This worker process's kept session (a worker measures one candidate at a time)."""

    session: Any = None
    key: tuple[str, int, str] = ("", 0, "")
    opened: float = 0.0
    last_used: float = 0.0
    in_use: bool = False
    closer: threading.Thread | None = None


_LOCK = threading.Lock()
_KEPT = _Kept()


def _alive(session: Any) -> bool:
    """Whether ``session`` still answers (one round trip)."""
    try:
        session.get_function("runtime.NumThreads")()
    except Exception:  # noqa: BLE001 - any failure means a new session
        return False
    return True


def _close_when_idle(idle_s: float) -> None:
    """The closer thread's loop: close the session once idle for ``idle_s``.

    The cycle collector then frees what a failed run left holding it (a new
    session's ``create`` collects on its own: :func:`farm.jobs.session.connect_fresh`).
    """
    while True:
        time.sleep(idle_s / 4)
        with _LOCK:
            if (_KEPT.session is not None and not _KEPT.in_use
                    and time.monotonic() - _KEPT.last_used >= idle_s):
                _KEPT.session = None
                gc.collect()


@dataclass(frozen=True)
class KeptSession:
    """MetaSchedule ``f_create_session`` keeping its worker's session (picklable).

    Attributes:
        create: opens a new session from MetaSchedule's ``RPCConfig``, after
            collecting garbage, which closes the session replaced
            (:class:`farm.jobs.session.ThreadPoolSession`, :func:`farm.jobs.session.connect_fresh`).
        idle_s: seconds idle after which the session is closed.
    """

    create: Callable[[Any], Any]
    idle_s: float = IDLE_S

    def __call__(self, rpc_config: Any) -> Any:
        """The worker's kept session if alive, of the same tracker key and young; else a new one.

        Raises:
            whatever ``create`` raises (MetaSchedule records the candidate as failed).
        """
        key = (str(rpc_config.tracker_host), int(rpc_config.tracker_port),
               str(rpc_config.tracker_key))
        max_age_s = float(rpc_config.session_timeout_sec or 0) / 2
        with _LOCK:
            _KEPT.in_use = True
            if _KEPT.closer is None:
                _KEPT.closer = threading.Thread(target=_close_when_idle, args=(self.idle_s,),
                                                daemon=True, name="kept-session-closer")
                _KEPT.closer.start()
            now = time.monotonic()
            session = _KEPT.session
            if session is not None and (_KEPT.key != key
                                        or (max_age_s > 0 and now - _KEPT.opened > max_age_s)
                                        or not _alive(session)):
                # Unreferenced before ``create``, whose collection then closes it.
                session = _KEPT.session = None
            if session is None:
                session = self.create(rpc_config)
                _KEPT.session, _KEPT.key, _KEPT.opened = session, key, time.monotonic()
            return session


def kept_cleanup(_session: Any, _remote_path: str | None) -> None:
    """MetaSchedule ``f_cleanup`` of a :class:`KeptSession`: the candidate done, the session idle.

    The candidate's library was removed once loaded (:func:`remote_name`);
    the session's folder stays for the next candidate.
    """
    with _LOCK:
        _KEPT.in_use = False
        _KEPT.last_used = time.monotonic()


def remote_name(local_path: str) -> str:
    """The phone-side name of a candidate's library: its build folder's name and its file name.

    Each build has a folder of its own (``farm-ms-...``, :func:`farm.tuning.builder.artifact_path`).

    >>> remote_name("/tmp/farm-ms-ab12/tvm_tmp_mod.so")
    'farm-ms-ab12-tvm_tmp_mod.so'
    """
    path = Path(local_path)
    return f"{path.parent.name}-{path.name}"
