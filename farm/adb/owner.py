"""``<data_dir>/adb-server.json``: the adb server a farmd started, so a later farmd owns it again.

``adb start-server`` forks the server into its own session (its parent is
PID 1), so it outlives a farmd killed with ``-9``. farmd records the server it
started (``{"pid": ..., "create_time": ..., "port": ...}``); the next farmd of
that data folder calls :func:`adopt_adb_server` before it checks the port:

* the recorded process is alive, is an adb server and listens on our port:
  it is owned again, so that farmd's stop ends it;
* it is alive but listens on another port (``adb.port`` changed meanwhile):
  nobody would ever end it, so it is ended now;
* it is dead, or its pid now belongs to another process (``create_time``
  differs): the file is removed.

A server that was not recorded (a person's ``adb``, another tool's) is never
owned and never ended.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import psutil

from farm import logs
from farm.adb.server import AdbServer
from farm.privacy import write_private
from farm.procs import read_pid_record

__all__ = ["ADB_PIDFILE_NAME", "adopt_adb_server", "forget_adb_server", "listening_pid",
           "record_adb_server"]

log = logs.get_logger(__name__)

ADB_PIDFILE_NAME = "adb-server.json"
_CREATE_TIME_SLACK_S = 1.0  # psutil rounds start times; allow for it
_END_DEADLINE_S = 10.0


def listening_pid(port: int) -> int | None:
    """The pid of the adb process listening on 127.0.0.1:``port``, or None.

    Only processes whose executable is named ``adb`` are looked at (the
    server's argv is ``adb -L tcp:PORT fork-server server ...``).
    """
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] != "adb":
                continue
            for conn in proc.net_connections(kind="tcp"):
                if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port:
                    return int(proc.pid)
        except psutil.Error:
            continue
    return None


def record_adb_server(data_dir: Path, server: AdbServer) -> None:
    """Note in ``data_dir`` that this farmd started the adb server on ``server.port``.

    Nothing is written if no adb process listens on the port (it died already).
    """
    pid = listening_pid(server.port)
    if pid is None:
        return
    try:
        create_time = psutil.Process(pid).create_time()
    except psutil.Error:
        return
    write_private(data_dir / ADB_PIDFILE_NAME,
                  json.dumps({"pid": pid, "create_time": create_time, "port": server.port}))


def forget_adb_server(data_dir: Path) -> None:
    """Remove the record (the server was ended); a missing file is fine."""
    (data_dir / ADB_PIDFILE_NAME).unlink(missing_ok=True)


def adopt_adb_server(data_dir: Path, server: AdbServer) -> bool:
    """Own again the adb server a dead farmd of ``data_dir`` started; call before starting one.

    Returns:
        True if the recorded server is alive and serves ``server.port``: the
        caller owns it (ends it at its stop). False otherwise; a recorded
        server on another port is ended, a stale record removed.
    """
    record = read_pid_record(data_dir / ADB_PIDFILE_NAME)
    if record is None:
        forget_adb_server(data_dir)
        return False
    pid, port = record.get("pid"), record.get("port")
    process = _same_process(pid, record.get("create_time"))
    if process is None or not isinstance(port, int) or listening_pid(port) != pid:
        log.info("adb_server_record_removed", pid=pid, adb_port=port, reason="not running")
        forget_adb_server(data_dir)
        return False
    if port == server.port:
        log.info("adb_server_adopted", pid=pid, adb_port=port)
        return True
    # Ours, but on a port this farmd no longer uses: nobody else would end it.
    with contextlib.suppress(psutil.Error):
        process.terminate()
        process.wait(timeout=_END_DEADLINE_S)
    with contextlib.suppress(psutil.Error):
        process.kill()
    log.info("adb_server_ended", pid=pid, adb_port=port, reason="adb.port changed")
    forget_adb_server(data_dir)
    return False


def _same_process(pid: object, create_time: object) -> psutil.Process | None:
    """The live process ``pid`` if it was started at ``create_time``, else None."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return None
    if not isinstance(create_time, (int, float)):
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        if abs(process.create_time() - create_time) > _CREATE_TIME_SLACK_S:
            return None
    except psutil.Error:
        return None
    return process
