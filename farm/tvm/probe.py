"""Probe a tracker key with a real TVM RPC session, under a hard deadline.

The tracker keeps listing servers that died without closing their socket
(a frozen or unplugged phone) and hands their tickets to clients, and TVM's
client then blocks in ``rpc.connect`` with no timeout. So the session is
opened in a child process (``python -m farm.tvm.probe``) in its own process
group, which :func:`probe_session` kills when the deadline passes: a thread
could not be stopped and would leak a socket and a blocked C++ call per probe.

The child does what ``TrackerSession.request`` does (apache/tvm
``python/tvm/rpc/client.py``): a REQUEST to the tracker for ``[host, port,
matchkey]``, then ``rpc.connect(host, port, matchkey, session_timeout)``. It
asks the tracker itself so it can report the ticket's address before
connecting: when the server hangs, the error names the server that hung. The
check is a real round trip: the remote CPU device exists, and 1024 float32
values copied to the phone and back come back equal.

The same child reads a phone's GPU limits (:func:`read_gpu_limits`) through
a session, under the same deadline.

The child imports TVM (about 1 s on the 2-core CI machine), which counts
against ``timeout_s``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from farm.device.facts import GPU_APIS, GPU_LIMITS, gpu_limits_from
from farm.errors import NoFreeServer, SessionError, TrackerUnreachable
from farm.procs import signal_group
from farm.tvm import protocol
from farm.tvm.protocol import TrackerCode

_PRIORITY = 1
"""The probe's tracker request priority (TVM's default; higher is served first)."""
_SESSION_TIMEOUT_S = 60
"""Whole seconds the server allows a probe's session (the app parses ``-timeout=`` as an int)."""


@dataclass(frozen=True)
class ProbeResult:
    """A probe that worked.

    Attributes:
        key: the tracker key probed.
        server_host: address the tracker sent the client to.
        server_port: port the tracker sent the client to.
        connect_ms: from ticket to an open session.
        roundtrip_ms: copying 4 KiB to the remote device and back.
        total_s: the whole probe, child start to result, in seconds.
    """

    key: str
    server_host: str
    server_port: int
    connect_ms: float
    roundtrip_ms: float
    total_s: float


def probe_session(
    tracker_host: str,
    tracker_port: int,
    key: str,
    timeout_s: float = 20.0,
    *,
    serial: str | None = None,
) -> ProbeResult:
    """Open a real session for ``key`` through the tracker and check it, within ``timeout_s``.

    Args:
        tracker_host: tracker address.
        tracker_port: tracker port.
        key: tracker key, e.g. ``android``.
        timeout_s: hard deadline for everything, TVM's import included.
        serial: phone named in errors; by default the ticket's ``host:port``.

    Raises:
        SessionError: no ticket, or the server did not serve, within the deadline,
            or the session failed its check.
        TrackerUnreachable: the tracker refused or is not a tracker.
    """
    started = time.monotonic()
    run = _run_child(tracker_host, tracker_port, key, "session", timeout_s)
    ticket, done = run.result(serial)
    return ProbeResult(
        key=key,
        server_host=str(ticket["host"]),
        server_port=int(ticket["port"]),
        connect_ms=float(done["connect_ms"]),
        roundtrip_ms=float(done["roundtrip_ms"]),
        total_s=round(time.monotonic() - started, 3),
    )


def read_gpu_limits(
    tracker_host: str, tracker_port: int, key: str, timeout_s: float, serial: str
) -> dict[str, dict[str, int]]:
    """The phone's OpenCL and Vulkan limits, read through a real RPC session.

    The child asks the remote runtime ``remote.device(api, 0).exist`` and, for
    each API that exists, the attributes of :data:`farm.device.facts.GPU_LIMITS`
    (apache/tvm ``python/tvm/runtime/device.py``: an RPC device answers with the
    phone's own values; TVM's runtime reads OpenCL's
    ``CL_DEVICE_MAX_WORK_GROUP_SIZE`` and Vulkan's ``maxComputeWorkGroupInvocations``
    for ``max_threads_per_block``). A runtime built without an API (the PyPI
    wheel the virtual phones run has no OpenCL or Vulkan) says it does not exist.

    Args:
        tracker_host: tracker address.
        tracker_port: tracker port.
        key: the tracker key only this phone serves (its ``phone_key``).
        timeout_s: hard deadline for everything, TVM's import included.
        serial: the phone, named in errors.

    Returns:
        ``facts["gpu_limits"]``: API name -> attribute -> positive int, e.g.
        ``{"opencl": {"max_threads_per_block": 1024, "warp_size": 1,
        "max_shared_memory_per_block": 32768}}``; ``{}`` for a phone without a GPU API.

    Raises:
        SessionError: no session within the deadline, or the session failed.
        TrackerUnreachable: the tracker refused or is not a tracker.
    """
    run = _run_child(tracker_host, tracker_port, key, "gpu-limits", timeout_s)
    _, done = run.result(serial)
    return gpu_limits_from(done.get("limits") or {})


@dataclass(frozen=True)
class _ChildRun:
    """What a probe child printed, and how it ended."""

    tracker_host: str
    tracker_port: int
    key: str
    timeout_s: float
    stages: dict[str, dict[str, Any]]
    returncode: int | None
    stderr: bytes
    timed_out: bool

    def result(self, serial: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ticket and the ``done`` stage, or the error the run ended in.

        Raises:
            TrackerUnreachable, NoFreeServer, SessionError: see :func:`probe_session`.
        """
        ticket = self.stages.get("ticket")
        name = serial or (f"{ticket['host']}:{ticket['port']}" if ticket else f"key:{self.key}")
        if "tracker_error" in self.stages:
            raise TrackerUnreachable(self.tracker_host, self.tracker_port,
                                     self.stages["tracker_error"]["reason"])
        if self.timed_out:
            if ticket is None:
                raise NoFreeServer(name, f"no server for key {self.key!r} "
                                         f"within {self.timeout_s:g} s")
            raise SessionError(name, f"server {ticket['host']}:{ticket['port']} took the ticket "
                                     f"but did not serve within {self.timeout_s:g} s")
        done = self.stages.get("done")
        if self.returncode != 0 or done is None or ticket is None:
            failed = self.stages.get("failed", {}).get("reason") or _last_line(self.stderr)
            raise SessionError(name, f"probe exited {self.returncode}: {failed}")
        return ticket, done


def _run_child(
    tracker_host: str, tracker_port: int, key: str, check: str, timeout_s: float
) -> _ChildRun:
    """Run ``python -m farm.tvm.probe`` in its own process group, killed at ``timeout_s``."""
    argv = [sys.executable, "-m", "farm.tvm.probe", "--tracker", f"{tracker_host}:{tracker_port}",
            "--key", key, "--check", check]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        signal_group(proc.pid)
        out, err = proc.communicate()
    finally:
        signal_group(proc.pid)  # session children, if any
    return _ChildRun(tracker_host, tracker_port, key, timeout_s, _parse_stages(out),
                     proc.returncode, err, timed_out)


def _parse_stages(out: bytes) -> dict[str, dict[str, Any]]:
    stages: dict[str, dict[str, Any]] = {}
    for line in out.decode(errors="replace").splitlines():
        with contextlib.suppress(json.JSONDecodeError, TypeError, KeyError):
            record = json.loads(line)
            stages[str(record["stage"])] = record
    return stages


def _last_line(data: bytes) -> str:
    lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


# --- the child -------------------------------------------------------------------


def _emit(stage: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"stage": stage, **fields}) + "\n")
    sys.stdout.flush()


def _connect(tracker: str, key: str) -> tuple[Any, float] | int:
    """A ticket from the tracker, then a session on it.

    Returns ``(session, start)`` with ``start`` the ``perf_counter`` value when
    connecting began, or an exit code when either step fails. TVM is imported
    after the ticket (about 1 s on the 2-core CI machine, several under load),
    so a probe whose server hangs still names it before its deadline.
    """
    host, _, port_text = tracker.rpartition(":")
    no_deadline = math.inf
    try:
        sock = protocol.open_tracker(host, int(port_text), time.monotonic() + 10.0)
    except (OSError, protocol.FrameError) as exc:
        _emit("tracker_error", reason=f"{type(exc).__name__}: {exc}")
        return 3
    with sock:
        reply = protocol.call(sock, [TrackerCode.REQUEST.value, key, "", _PRIORITY], no_deadline)
    if not (isinstance(reply, list) and reply[0] == TrackerCode.SUCCESS):
        _emit("failed", reason=f"tracker answered {reply!r}")
        return 2
    server_host, server_port, matchkey = reply[1]
    _emit("ticket", host=server_host, port=server_port)
    from tvm import rpc

    started = time.perf_counter()
    try:
        return rpc.connect(server_host, int(server_port), matchkey, _SESSION_TIMEOUT_S), started
    except Exception as exc:  # noqa: BLE001  TVM raises TVMError, RuntimeError... from C++
        _emit("failed", reason=_reason(exc))
        return 2


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _check_session(sess: Any, started: float) -> int:
    import numpy as np
    from tvm import runtime as tvm_runtime

    connected = time.perf_counter()
    try:
        dev = sess.cpu(0)
        if not dev.exist:
            _emit("failed", reason="remote cpu(0) does not exist")
            return 2
        values = np.arange(1024, dtype="float32")
        copied = tvm_runtime.tensor(values, dev).numpy()
        done = time.perf_counter()
    except Exception as exc:  # noqa: BLE001  TVM raises TVMError, RuntimeError... from C++
        _emit("failed", reason=_reason(exc))
        return 2
    if not np.array_equal(copied, values):
        _emit("failed", reason="round trip changed the data")
        return 2
    _emit(
        "done",
        connect_ms=round((connected - started) * 1e3, 3),
        roundtrip_ms=round((done - connected) * 1e3, 3),
    )
    return 0


def _check_gpu_limits(sess: Any) -> int:
    limits: dict[str, dict[str, Any]] = {}
    for api in GPU_APIS:
        try:
            dev = sess.device(api, 0)
            if not dev.exist:
                continue
        except Exception as exc:  # noqa: BLE001  a runtime without the API may raise
            _emit("api_error", api=api, reason=_reason(exc))
            continue
        values: dict[str, Any] = {}
        for name in GPU_LIMITS:
            # One attribute a driver cannot answer leaves the others readable.
            with contextlib.suppress(Exception):
                values[name] = getattr(dev, name)
        limits[api] = values
    _emit("done", limits=limits)
    return 0


def _child(tracker: str, key: str, check: str) -> int:
    connected = _connect(tracker, key)
    if isinstance(connected, int):
        return connected
    sess, started = connected
    return _check_session(sess, started) if check == "session" else _check_gpu_limits(sess)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the probe child."""
    parser = argparse.ArgumentParser(prog="farm.tvm.probe")
    parser.add_argument("--tracker", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--check", choices=("session", "gpu-limits"), default="session")
    args = parser.parse_args(argv)
    return _child(args.tracker, args.key, args.check)


if __name__ == "__main__":
    sys.exit(main())
