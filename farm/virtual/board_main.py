"""One virtual board's keeper process: runs its ``sshd`` and ends everything the board ran.

Started by :class:`farm.virtual.board.VirtualBoard` (``python -m
farm.virtual.board_main --config SSHD_CONFIG --marker TOKEN --port N``) in its
own process group. It:

* ends with its parent, even on ``kill -9`` (:func:`farm.procs.end_group_with_parent`
  style: ``PR_SET_PDEATHSIG`` then SIGTERM handling);
* runs OpenSSH's ``sshd -D -e`` (foreground, log on stderr) with the board's
  config, itself tied to this process by ``PR_SET_PDEATHSIG``; prints ``ready``
  once the port accepts connections;
* on SIGUSR1 *unplugs* the board: SIGKILLs sshd and every connection it forked
  (each calls ``setsid``, so they are found as descendants, not by group); on
  SIGUSR2 starts sshd again (*replug*);
* adopts the board's orphans (``PR_SET_CHILD_SUBREAPER``) and reaps them, as a
  board's init would: the RPC server the controller detached with ``setsid``
  is one, and once killed it must not stay a zombie;
* on SIGTERM (or its parent's death) SIGKILLs sshd's tree and every process
  whose environment carries ``FARM_VIRTUAL_BOARD=TOKEN`` (sshd's ``SetEnv``
  gives it to every login, so the RPC server the controller started with
  ``setsid nohup`` and the workers it forked are found even though they left
  every session and group), then exits.

Why a keeper and not sshd alone: what the controller starts on a board is meant
to outlive the SSH session (a real board keeps its server running), so only a
process that knows the board's marker can end it with the test.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import os
import signal
import socket
import subprocess
import sys

import psutil

from farm.clock import wait_until
from farm.procs import set_parent_death_signal

MARKER_VARIABLE = "FARM_VIRTUAL_BOARD"
SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = "/run/sshd"  # sshd run as root refuses to start without it (Debian's unit makes it)
READY_TIMEOUT_S = 20.0
_ENDING = {signal.SIGTERM, signal.SIGINT}
_SIGNALS = {*_ENDING, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD}
_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_POLL_S = 0.05


def accepts(port: int) -> bool:
    """Whether something accepts TCP connections on ``127.0.0.1:port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _kill_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.Error:
        return
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=5)


def marked(token: str) -> list[psutil.Process]:
    """Every live process whose environment holds ``FARM_VIRTUAL_BOARD=token``."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.pid != os.getpid() and proc.environ().get(MARKER_VARIABLE) == token:
                found.append(proc)
    return found


def _become_subreaper() -> None:
    """Adopt the board's orphans (``PR_SET_CHILD_SUBREAPER``), as a board's init does."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is not None:
        ctypes.CDLL(libc_name, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _reap_orphans(keeper: Keeper) -> None:
    """Reap every adopted child that ended (not sshd: its Popen reaps it)."""
    for proc in psutil.Process().children():
        if keeper.sshd is not None and proc.pid == keeper.sshd.pid:
            continue
        with contextlib.suppress(ChildProcessError, psutil.Error):
            if proc.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(proc.pid, os.WNOHANG)


def _sshd_setup() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    set_parent_death_signal(signal.SIGKILL)


class Keeper:
    """The sshd of one board and the cleanup of everything it started."""

    def __init__(self, config: str, port: int, token: str, log: str) -> None:
        self.config = config
        self.port = port
        self.token = token
        self.log = log
        self.sshd: subprocess.Popen[bytes] | None = None

    def start_sshd(self) -> None:
        """Start sshd and wait until its port accepts connections.

        Raises:
            RuntimeError: sshd exited or did not listen within READY_TIMEOUT_S.
        """
        if os.geteuid() == 0:
            os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
        with open(self.log, "ab") as log:
            # This process is single-threaded, so a preexec_fn is safe here; the
            # death signal survives sshd's exec, the blocked signals must not.
            self.sshd = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", self.config], stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, preexec_fn=_sshd_setup)  # noqa: PLW1509
        sshd = self.sshd
        wait_until(lambda: sshd.poll() is not None or accepts(self.port), READY_TIMEOUT_S,
                   interval_s=_POLL_S)
        if not accepts(self.port):
            raise RuntimeError(f"sshd did not listen on {self.port}; see {self.log}")

    def stop_sshd(self) -> None:
        """SIGKILL sshd and every connection process it forked."""
        if self.sshd is not None:
            _kill_tree(self.sshd.pid)
            self.sshd.wait()
            self.sshd = None

    def end_all(self) -> None:
        """Stop sshd and SIGKILL every process carrying the board's marker."""
        self.stop_sshd()
        for _ in range(3):  # a dying server may still be forking a worker
            procs = marked(self.token)
            if not procs:
                break
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            psutil.wait_procs(procs, timeout=5)


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module doc."""
    parser = argparse.ArgumentParser(prog="farm.virtual.board_main")
    parser.add_argument("--config", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--marker", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args(argv)
    keeper = Keeper(args.config, args.port, args.marker, args.log)
    # Signals are taken one at a time by sigwaitinfo, never by handlers, so an
    # unplug and a replug sent back to back cannot interleave.
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    set_parent_death_signal(signal.SIGTERM)
    _become_subreaper()
    if os.getppid() != args.parent:
        return 0
    try:
        keeper.start_sshd()
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        while (signum := signal.sigwaitinfo(_SIGNALS).si_signo) not in _ENDING:
            if signum == signal.SIGCHLD:
                _reap_orphans(keeper)
            elif signum == signal.SIGUSR1:
                keeper.stop_sshd()
            elif keeper.sshd is None:
                keeper.start_sshd()
    finally:
        keeper.end_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
