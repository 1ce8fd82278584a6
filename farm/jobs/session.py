"""RPC sessions to a phone through the tracker, with TVM's errors mapped to farm's.

Everything a job does on the phone goes through here: open a session by tracker
key, set the runtime thread pool, upload and load a library. TVM raises
``TVMError``/``RuntimeError``/``OSError`` for a dropped or refused session; they
become :class:`~farm.errors.SessionError` (the phone's fault, retried elsewhere)
or :class:`~farm.errors.TrackerUnreachable` (the host's tracker).
"""

from __future__ import annotations

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
