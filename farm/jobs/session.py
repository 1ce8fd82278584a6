"""RPC sessions to a phone through the tracker, with TVM's errors mapped to farm's.

Everything a job does on the phone goes through here: open a session by tracker
key, set the runtime thread pool, upload and load a library. TVM raises
``TVMError``/``RuntimeError``/``OSError`` for a dropped or refused session; they
become :class:`~farm.errors.SessionError` (the phone's fault, retried elsewhere)
or :class:`~farm.errors.TrackerUnreachable` (the host's tracker).
"""

from __future__ import annotations

import gc
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from farm.errors import SessionError, TrackerUnreachable
from farm.jobs.params import ThreadPoolParams, TrackerParams

if TYPE_CHECKING:
    from tvm.rpc.client import RPCSession

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ThreadPoolApplied:
    """Thread pool settings in force on the phone while timing.

    Attributes:
        affinity_mode: what was asked (1 big, -1 little, 0 default).
        num_threads_requested: what was asked; 0 means one per core of the kind.
        num_threads: what the phone's runtime reports it uses (``runtime.NumThreads``).
    """

    affinity_mode: int
    num_threads_requested: int
    num_threads: int


def _phone(tracker: TrackerParams) -> str:
    return tracker.serial or f"key:{tracker.key}"


def open_session(tracker: TrackerParams) -> RPCSession:
    """Ask the tracker for a session with a server of ``tracker.key``.

    The request runs in a thread with ``tracker.connect_timeout_s`` as deadline,
    because ``TrackerSession.request`` retries forever while no server is free.

    Args:
        tracker: tracker address, key and session timeout (whole seconds).

    Returns:
        The open RPC session.

    Raises:
        TrackerUnreachable: nothing answers at the tracker address.
        SessionError: no server of the key came free in time, or the session failed.
    """
    from tvm import rpc

    try:
        tracker_session = rpc.connect_tracker(tracker.host, tracker.port)
    except (OSError, RuntimeError) as exc:
        raise TrackerUnreachable(tracker.host, tracker.port, str(exc)) from exc
    result: dict[str, Any] = {}

    def request() -> None:
        try:
            result["session"] = tracker_session.request(
                tracker.key,
                priority=1,
                session_timeout=int(tracker.session_timeout_s),
                max_retry=1,
            )
        except Exception as exc:  # noqa: BLE001 - reported through `result`
            result["error"] = exc

    thread = threading.Thread(target=request, daemon=True, name="rpc-request")
    thread.start()
    thread.join(tracker.connect_timeout_s)
    if "session" in result:
        log.info("rpc_session_opened", serial=tracker.serial, key=tracker.key)
        return result["session"]
    reason = (
        f"no server of key {tracker.key!r} within {tracker.connect_timeout_s:g} s"
        if thread.is_alive()
        else f"request for key {tracker.key!r} failed: {result.get('error')}"
    )
    raise SessionError(_phone(tracker), reason) from result.get("error")


def apply_thread_pool(
    remote: RPCSession, threads: ThreadPoolParams, tracker: TrackerParams
) -> ThreadPoolApplied:
    """Configure the phone's TVM thread pool (``runtime.config_threadpool``).

    Args:
        remote: the open session.
        threads: affinity mode and thread count.
        tracker: names the phone in errors.

    Returns:
        The settings and the thread count the runtime reports afterwards.

    Raises:
        SessionError: the session dropped.
    """
    try:
        remote.get_function("runtime.config_threadpool")(threads.affinity_mode, threads.num_threads)
        num_threads = int(remote.get_function("runtime.NumThreads")())
    except (RuntimeError, OSError) as exc:
        raise SessionError(_phone(tracker), f"config_threadpool failed: {exc}") from exc
    return ThreadPoolApplied(threads.affinity_mode, threads.num_threads, num_threads)


def connect_fresh(rpc_config: Any) -> Any:
    """MetaSchedule's ``rpc_config.connect_server()``, once the worker's old sessions are closed.

    A phone serves one session at a time, and MetaSchedule's runner worker asks
    the tracker for the next one with no timeout. When a candidate's run
    raises, its session stays referenced from the exception's traceback
    through the runner's cleanup context manager (``_worker_func``, apache/tvm
    ``python/tvm/s_tir/meta_schedule/runner/rpc_runner.py``): garbage in a
    reference cycle, closed only when Python's cycle collector next runs,
    which an idle worker may not do for hours. Seen: a 1000-trial tune of the
    small CNN stood still for 15 minutes, the worker waiting for the phone its
    own dead session held; a ``gc.collect()`` in the worker freed it and the
    tuning went on. So each session starts with one (a few milliseconds).

    Picklable: MetaSchedule's runner workers call it.
    """
    gc.collect()
    return rpc_config.connect_server()


@dataclass(frozen=True)
class ThreadPoolSession:
    """MetaSchedule ``f_create_session`` that sets the phone's thread pool as the timings do.

    Each session (the RPC server forks one per session; a tuning runner's
    worker keeps one for its candidates, :mod:`farm.tuning.kept_session`)
    starts with the runtime's default pool: one thread per
    core the process may run on. The job's own timings (:func:`apply_thread_pool`)
    run with the job's ``threads``; unless candidates are timed the same way, the
    search ranks schedules for another thread count than the one the job reports.
    Measured on a 64-core host with the phone's process on one core: a default
    pool of 64 threads on that core timed ResNet-18's convolutions 30x slower than
    one thread, in multiples of the 4 ms scheduler tick, and no searched candidate
    survived the pick check. Picklable: MetaSchedule's runner workers call it.

    Attributes:
        affinity_mode: ``ThreadPoolParams.affinity_mode``.
        num_threads: ``ThreadPoolParams.num_threads``.
    """

    affinity_mode: int
    num_threads: int

    def __call__(self, rpc_config: Any) -> Any:
        """Connect (:func:`connect_fresh`), then configure the pool (CPU only matters)."""
        session = connect_fresh(rpc_config)
        session.get_function("runtime.config_threadpool")(self.affinity_mode, self.num_threads)
        return session


def upload_and_load(
    remote: RPCSession, library: Path, remote_name: str, tracker: TrackerParams
) -> Any:
    """Upload a ``.so`` into the session's folder and load it on the phone.

    Args:
        remote: the open session.
        library: the local ``.so``.
        remote_name: file name on the phone, e.g. ``"gemm-1a2b.so"``.
        tracker: names the phone in errors.

    Returns:
        The remote ``tvm.runtime.Module``.

    Raises:
        SessionError: the upload or the load failed (session dropped, or the
            phone's linker refused the library).
    """
    upload(remote, library, remote_name, tracker)
    return load(remote, remote_name, tracker)


def upload(remote: RPCSession, library: Path, remote_name: str, tracker: TrackerParams) -> None:
    """Upload a ``.so`` into the session's folder (the first half of :func:`upload_and_load`).

    Raises:
        SessionError: the upload failed.
    """
    try:
        remote.upload(str(library), remote_name)
    except (RuntimeError, OSError) as exc:
        raise SessionError(_phone(tracker), f"cannot load {remote_name}: {exc}") from exc


def load(remote: RPCSession, remote_name: str, tracker: TrackerParams) -> Any:
    """Load an uploaded ``.so`` on the phone (the second half of :func:`upload_and_load`).

    Raises:
        SessionError: the session dropped or the phone's linker refused the library.
    """
    try:
        return remote.load_module(remote_name)
    except (RuntimeError, OSError) as exc:
        raise SessionError(_phone(tracker), f"cannot load {remote_name}: {exc}") from exc
