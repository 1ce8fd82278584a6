"""The commands farm runs on a Linux board, as argv lists, and readers of what they print.

Pure: no SSH here (:mod:`farm.ssh` runs them, :mod:`farm.controllers.board`
wires the two). Every command is an argv list; where one round trip must run
several steps (facts, health, starting the server in the background), the argv
is ``["sh", "-c", SCRIPT]`` and SCRIPT is assembled from :func:`shlex.join` /
:func:`shlex.quote` pieces, so no configured path or key is ever read as shell
syntax. Multi-part output is split at :data:`SECTION` lines.

The RPC server runs as ``setsid sh -c 'echo $$ >PIDFILE; exec nohup SERVER'``
in the board's work folder: it leads its own session and process group, whose
id is in the pidfile, so :func:`stop_server_argv` ends it and every session
worker it forked with one ``kill -9 -PGID`` (the form dash, bash and busybox
all read; dash refuses ``--`` there). It outlives the SSH session that started
it, as a board's server should.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from farm.config import BoardSettings

__all__ = [
    "PIDFILE",
    "SECTION",
    "SERVER_LOG",
    "facts_argv",
    "health_argv",
    "reboot_argv",
    "runtime_check_argv",
    "sections",
    "server_argv",
    "start_server_argv",
    "stop_server_argv",
]

PIDFILE = "server.pid"
SERVER_LOG = "server.log"
#: Printed between the parts of one multi-part command's output.
SECTION = "@@farm-section@@"
#: Ports the board's RPC server may listen on (TVM's rpc_server defaults are 9090..9199).
SERVER_PORT, SERVER_PORT_END = 9090, 9199

_ECHO_SECTION = f"echo {SECTION}"


def _script(*steps: str) -> list[str]:
    return ["sh", "-c", "\n".join(steps)]


def _in_work_dir(board: BoardSettings) -> str:
    work = shlex.quote(board.work_dir)
    return f"mkdir -p {work} && cd {work} || exit 1"


def _group_alive() -> str:
    """Shell test: the pidfile's process group still has a live (non-zombie) process.

    ``kill -0 -PGID`` alone is not enough: a killed server whose parent has not
    reaped it yet (an init that reaps slowly, a container's PID 1 that never
    does) is a zombie still in its group. ``ps -e -o pgid=,stat=`` is procps'
    and busybox's syntax.
    """
    return (f'[ -s {PIDFILE} ] && ps -e -o pgid= -o stat= | '
            f'awk -v g="$(cat {PIDFILE})" \'$1 == g && $2 !~ /^Z/ {{ f = 1 }} END {{ exit !f }}\'')


def sections(output: bytes | str, count: int) -> list[str]:
    """Split a multi-part output at :data:`SECTION` lines.

    Raises:
        ValueError: it does not have exactly ``count`` parts (the command was
            cut short).
    """
    text = output.decode(errors="replace") if isinstance(output, bytes) else output
    parts: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line == SECTION:
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) != count:
        raise ValueError(f"expected {count} output sections, got {len(parts)}")
    return ["\n".join(lines).strip("\n") for lines in parts]


def facts_argv() -> list[str]:
    """One round trip for the board's facts.

    Sections: ``uname -m``, ``uname -r``, ``nproc``, ``/proc/cpuinfo``,
    ``/proc/device-tree/model`` (ARM boards; NUL-terminated, empty elsewhere),
    ``/proc/meminfo``.
    """
    return _script(
        "uname -m", _ECHO_SECTION, "uname -r", _ECHO_SECTION, "nproc", _ECHO_SECTION,
        "cat /proc/cpuinfo", _ECHO_SECTION,
        "tr -d '\\000' </proc/device-tree/model 2>/dev/null; echo", _ECHO_SECTION,
        "cat /proc/meminfo",
    )


def runtime_check_argv(board: BoardSettings) -> list[str]:
    """The command that succeeds only if the board can run the configured RPC server.

    ``python``: imports ``tvm.exec.rpc_server`` with the board's interpreter and
    prints TVM's version; otherwise ``test -x`` on the ``tvm_rpc`` binary.
    """
    if board.server == "python":
        return [board.python, "-c",
                "import tvm, tvm.exec.rpc_server; print(tvm.__version__)"]
    return ["test", "-x", board.server]


def server_argv(board: BoardSettings, tracker: str, key: str,
                custom_addr: str | None = None) -> list[str]:
    """The RPC server's own argv, registered at ``tracker`` (``host:port``) under ``key``.

    ``custom_addr``: the address the server reports to the tracker instead of
    the one the tracker sees (needed when it dials through a forward).

    Sources: apache/tvm ``python/tvm/exec/rpc_server.py`` (``--tracker``,
    ``--key``, ``--host``, ``--port``, ``--port-end``) and ``apps/cpp_rpc/main.cc``
    (the same options as ``--name=value`` after the ``server`` command).
    """
    if board.server == "python":
        argv = [board.python, "-m", "tvm.exec.rpc_server", "--tracker", tracker, "--key", key,
                "--host", "0.0.0.0", "--port", str(SERVER_PORT),  # noqa: S104 - the tracker's clients dial in
                "--port-end", str(SERVER_PORT_END)]
        return argv + (["--custom-addr", custom_addr] if custom_addr else [])
    argv = [board.server, "server", f"--tracker={tracker}", f"--key={key}", "--host=0.0.0.0",
            f"--port={SERVER_PORT}", f"--port-end={SERVER_PORT_END}"]
    return argv + ([f"--custom-addr={custom_addr}"] if custom_addr else [])


def start_server_argv(board: BoardSettings, server: Sequence[str]) -> list[str]:
    """(Re)start the RPC server detached in the work folder.

    Ends a server the pidfile names first, then runs ``server`` in a new session
    with its output in :data:`SERVER_LOG`, and prints its pid.
    """
    inner = f"echo $$ >{PIDFILE}; exec nohup {shlex.join(server)}"
    return _script(
        _in_work_dir(board),
        f'if {_group_alive()}; then kill -9 -"$(cat {PIDFILE})"; fi',
        f"rm -f {PIDFILE}",
        f"setsid sh -c {shlex.quote(inner)} >{SERVER_LOG} 2>&1 </dev/null &",
        f"n=0; while [ ! -s {PIDFILE} ] && [ $n -lt 100 ]; do sleep 0.05; n=$((n+1)); done",
        f"cat {PIDFILE}",
    )


def stop_server_argv(board: BoardSettings) -> list[str]:
    """SIGKILL the server's process group named by the pidfile; succeeds when none runs."""
    work = shlex.quote(board.work_dir)
    return _script(
        f"cd {work} 2>/dev/null || exit 0",
        f'if {_group_alive()}; then kill -9 -"$(cat {PIDFILE})"; fi',
        f"rm -f {PIDFILE}",
    )


def health_argv(board: BoardSettings, *, thermal_only: bool = False) -> list[str]:
    """One round trip for a health reading.

    Sections: thermal zone types, their temperatures (millidegrees; the same
    glob, so line N of each is one zone), then unless ``thermal_only``:
    ``/proc/loadavg``, ``/proc/meminfo``, ``df -k WORK_DIR``, and ``running``
    or ``stopped`` for the server's process group.
    """
    zones = shlex.quote(board.sysfs_root.rstrip("/") + "/class/thermal") + "/thermal_zone*"
    steps = [f"cat {zones}/type 2>/dev/null", _ECHO_SECTION, f"cat {zones}/temp 2>/dev/null"]
    if not thermal_only:
        work = shlex.quote(board.work_dir)
        steps += [
            _ECHO_SECTION, "cat /proc/loadavg", _ECHO_SECTION, "cat /proc/meminfo", _ECHO_SECTION,
            f"mkdir -p {work}; df -k {work}", _ECHO_SECTION,
            f"cd {work} && if {_group_alive()}; then echo running; else echo stopped; fi",
        ]
    return _script(*steps, "true")


def reboot_argv(board: BoardSettings) -> list[str]:
    """Reboot the board: ``reboot`` as root, else ``sudo -n reboot`` (passwordless sudo)."""
    return ["reboot"] if board.user == "root" else ["sudo", "-n", "reboot"]
