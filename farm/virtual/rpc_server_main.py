"""The TVM RPC app's ``:RPCProcess``: registers with a tracker, serves one session at a time.

Run by :mod:`farm.virtual.rpc_process` as
``python -m farm.virtual.rpc_server_main --tracker H:P --key K --listen-fd FD
--report-port D --log FILE``. It takes the listening socket its parent bound
(file descriptor FD), prints ``listening <real_port>`` on stdout once and then behaves like the
stock app's processor, apache/tvm ``jvm/core/src/main/java/org/apache/tvm/rpc/
ConnectTrackerServerProcessor.java`` with ``apps/android_rpc/.../RPCProcessor.java``
and ``RPCWatchdog.java``:

- each round opens a new tracker connection, sends ``UPDATE_INFO`` with
  ``"addr": [null, "<port>"]`` (the port as a *string*, as the app's
  hand-written JSON does) and ``PUT [key, [port, key:<random>], null]``, so the
  tracker records the address it sees the app connect from;
- it accepts with a 300 s timeout (``STALE_TRACKER_TIMEOUT``); on expiry it asks
  ``GET_PENDING_MATCHKEYS`` and re-registers only when its match key is gone;
- a client whose key does not contain the match key gets ``RPC_CODE_MISMATCH``;
- ``-timeout=`` is read with ``Integer.parseInt`` (``-timeout=10.0`` fails the
  round), 300 s when absent; a session past it ends the whole process with exit
  code 0 (``RPCWatchdog.terminate`` calls ``System.exit(0)``);
- after a session the tracker connection is closed and a new round starts with
  a new match key.

The session itself is served by TVM's own server code
(``tvm.rpc.server._serve_loop``: ``_server_env`` + ``ServerLoop``) in a forked
child, as ``tvm.rpc.server._serving`` does, so modules upload, load and run for
real. The port the tracker hears (``--report-port``, the device port) is
separate from the real port, as in ``tvm.rpc.server._listen_loop``.

Every event is one JSON line in ``--log``: ``{"ts": <unix s>, "event": ..., ...}``.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from farm.procs import end_group_with_parent
from farm.tvm import protocol
from farm.tvm.protocol import RPC_CODE_MISMATCH, RPC_MAGIC, TrackerCode

TRACKER_CONNECT_TIMEOUT_S = 6.0  # TRACKER_TIMEOUT in ConnectTrackerServerProcessor.java
RETRY_PERIOD_S = 6.0  # RETRY_PERIOD
STALE_TRACKER_TIMEOUT_S = 300.0  # STALE_TRACKER_TIMEOUT
HARD_TIMEOUT_DEFAULT_S = 300  # HARD_TIMEOUT_DEFAULT
TIMEOUT_ARG = "-timeout="  # RPC.TIMEOUT_ARG
CLIENT_HANDSHAKE_TIMEOUT_S = 30.0  # a client's magic and key


class EventLog:
    """Appends one JSON line per event to a file, flushed at once."""

    def __init__(self, path: Path) -> None:
        self._file: TextIO = path.open("a", encoding="utf-8", buffering=1)

    def event(self, event: str, **fields: Any) -> None:
        """Write ``{"ts", "event", **fields}`` as one line."""
        self._file.write(json.dumps({"ts": round(time.time(), 3), "event": event, **fields}) + "\n")


class RoundFailed(Exception):
    """This round of the processor ends; the next round starts over (as a Throwable does)."""


def parse_timeout_s(recv_key: str) -> int:
    """The session timeout the app allots for a client key, in whole seconds.

    Raises:
        ValueError: the value is not an integer (``Integer.parseInt`` fails).
    """
    index = recv_key.find(TIMEOUT_ARG)
    if index == -1:
        return HARD_TIMEOUT_DEFAULT_S
    return int(recv_key[index + len(TIMEOUT_ARG) :], 10)


class Processor:
    """One ``ConnectTrackerServerProcessor`` round after another on one listening socket."""

    def __init__(
        self,
        listen_sock: socket.socket,
        tracker: tuple[str, int],
        key: str,
        report_port: int,
        log: EventLog,
        stale_timeout_s: float,
        work_dir: Path | None,
    ) -> None:
        self.listen_sock = listen_sock
        self.tracker = tracker
        self.key = key
        self.report_port = report_port
        self.log = log
        self.stale_timeout_s = stale_timeout_s
        self.work_dir = work_dir

    def run_forever(self) -> None:
        """Serve rounds until a session times out (which exits the process).

        Every failed round waits ``RETRY_PERIOD_S`` before the next. The app waits
        only after a ConnectException, but a phone's unreachable target is a
        bridge that accepts and closes (see :mod:`farm.virtual.net`), which shows
        up here as a reset, not a refusal; waiting always avoids a busy loop.
        """
        while True:
            try:
                self.run_round()
            except (OSError, RoundFailed, ValueError) as exc:
                self.log.event("round_failed", reason=f"{type(exc).__name__}: {exc}")
                time.sleep(RETRY_PERIOD_S)

    def _connect_tracker(self) -> socket.socket:
        """Open a tracker connection (FrameError on a wrong magic) and send UPDATE_INFO."""
        host, port = self.tracker
        sock = protocol.open_tracker(host, port, time.monotonic() + TRACKER_CONNECT_TIMEOUT_S)
        try:
            # The port as a string, as the app's hand-written JSON sends it.
            info = {"key": f"server:{self.key}", "addr": [None, str(self.report_port)]}
            self._expect_success(sock, [TrackerCode.UPDATE_INFO.value, info])
        except BaseException:
            sock.close()
            raise
        return sock

    def _expect_success(self, tracker: socket.socket, message: list[Any]) -> None:
        # The app waits on the tracker without a timeout.
        if protocol.call(tracker, message, math.inf) != TrackerCode.SUCCESS:
            raise RoundFailed(f"tracker refused {json.dumps(message)}")

    def _register(self, tracker: socket.socket, matchkey: str) -> None:
        self._expect_success(
            tracker, [TrackerCode.PUT.value, self.key, [self.report_port, matchkey], None]
        )
        self.log.event("registered", key=self.key, port=self.report_port, matchkey=matchkey)

    def _accept_client(self, tracker: socket.socket, matchkey: str) -> tuple[socket.socket, str]:
        """Wait for a client that presents ``matchkey``; returns it and its key string."""
        while True:
            self.listen_sock.settimeout(self.stale_timeout_s)
            try:
                conn, peer = self.listen_sock.accept()
            except TimeoutError:
                pending = protocol.call(
                    tracker, [TrackerCode.GET_PENDING_MATCHKEYS.value], math.inf
                )
                # The app looks for its match key in the reply's text.
                if matchkey not in json.dumps(pending):
                    self._register(tracker, matchkey)
                continue
            deadline = time.monotonic() + CLIENT_HANDSHAKE_TIMEOUT_S
            try:
                magic = protocol.recv_int32(conn, deadline)
                recv_key = protocol.recv_string(conn, deadline) if magic == RPC_MAGIC else ""
            except (OSError, ValueError):
                conn.close()
                continue
            if magic != RPC_MAGIC or matchkey not in recv_key:
                conn.sendall(protocol.pack_int32(RPC_CODE_MISMATCH))
                conn.close()
                self.log.event("key_mismatch", peer=f"{peer[0]}:{peer[1]}")
                continue
            conn.settimeout(None)
            return conn, recv_key

    def run_round(self) -> None:
        """Register, accept one matching client, serve it, close the tracker connection."""
        matchkey = f"{self.key}:{random.random()}"
        tracker = self._connect_tracker()
        try:
            self.log.event("tracker_connected", tracker=f"{self.tracker[0]}:{self.tracker[1]}")
            self._register(tracker, matchkey)
            conn, recv_key = self._accept_client(tracker, matchkey)
            try:
                try:
                    timeout_s = parse_timeout_s(recv_key)
                except ValueError as exc:
                    raise RoundFailed(f"NumberFormatException: {exc}") from exc
                if not recv_key.startswith("client:"):
                    conn.sendall(protocol.pack_int32(RPC_CODE_MISMATCH))
                    raise RoundFailed(f"recv key mismatch: {recv_key!r}")
                conn.sendall(protocol.pack_int32(RPC_MAGIC))
                protocol.send_string(conn, recv_key, math.inf)
                self._serve(conn, timeout_s)
            finally:
                conn.close()
        finally:
            tracker.close()

    def _serve(self, conn: socket.socket, timeout_s: int) -> None:
        peer = conn.getpeername()
        work_path = Path(tempfile.mkdtemp(prefix="rpc-session-", dir=self.work_dir))
        self.log.event("session_started", peer=f"{peer[0]}:{peer[1]}", timeout_s=timeout_s)
        started = time.monotonic()
        session = multiprocessing.get_context("fork").Process(
            target=_session_main, args=(conn, work_path), daemon=False
        )
        session.start()
        conn.close()
        session.join(timeout_s if timeout_s > 0 else None)  # wait(0) in Java waits forever
        if session.is_alive():
            self.log.event("session_timeout", timeout_s=timeout_s)
            session.kill()
            session.join()
            shutil.rmtree(work_path, ignore_errors=True)
            os._exit(0)  # RPCWatchdog.terminate(): System.exit(0)
        shutil.rmtree(work_path, ignore_errors=True)
        self.log.event(
            "session_finished",
            duration_s=round(time.monotonic() - started, 3),
            exit_code=session.exitcode,
        )


def _session_main(conn: socket.socket, work_root: Path) -> None:
    """The forked session: TVM's own server loop on the accepted socket.

    The parent removes ``work_root`` when the session ends, so the session's
    temp directory lives inside it.
    """
    from tvm.rpc import server as tvm_server  # already imported by the parent
    from tvm.support import utils

    work_path = utils.tempdir(custom_path=str(work_root / "session"))
    os.chdir(work_path.path)
    tvm_server._serve_loop(conn, None, work_path)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rpc_server_main", description=__doc__.splitlines()[0])
    parser.add_argument("--tracker", required=True, help="HOST:PORT of the tracker endpoint")
    parser.add_argument("--key", required=True, help="tracker key, e.g. android")
    parser.add_argument("--listen-fd", type=int, required=True,
                        help="listening socket bound by the parent (rpc_process)")
    parser.add_argument("--report-port", type=int, required=True, help="device port to report")
    parser.add_argument("--log", type=Path, required=True, help="JSON-lines event log")
    parser.add_argument("--stale-timeout-s", type=float, default=STALE_TRACKER_TIMEOUT_S)
    parser.add_argument("--work-dir", type=Path, default=None, help="parent of session dirs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Announce the real port on stdout, import TVM, then serve forever."""
    args = _parse_args(argv)
    end_group_with_parent(os.getppid())  # an app outlives no farmd (farm-phones) that started it
    tracker_host, _, tracker_port = args.tracker.rpartition(":")
    log = EventLog(args.log)
    log.event("process_started", pid=os.getpid())
    listen_sock = socket.socket(fileno=args.listen_fd)
    real_port = listen_sock.getsockname()[1]
    sys.stdout.write(f"listening {real_port}\n")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # nobody reads the pipe any more
    log.event("listening", real_port=real_port, device_port=args.report_port)

    started = time.monotonic()
    import tvm.rpc.server  # noqa: F401  (seconds: load it once, before any session)

    log.event("tvm_imported", import_s=round(time.monotonic() - started, 3))
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
    Processor(
        listen_sock,
        (tracker_host, int(tracker_port)),
        args.key,
        args.report_port,
        log,
        args.stale_timeout_s,
        args.work_dir,
    ).run_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
