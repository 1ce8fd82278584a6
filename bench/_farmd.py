"""farmd and ``farm-phones serve`` as separate processes, as on a real host, and farmd's footprint.

Shared by the benches that watch farmd's own process (``bench_farmd_idle.py``,
``bench_soak.py``). The scripts run as ``python bench/<script>.py``, so
``bench/`` is on ``sys.path``.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psutil

from farm.netaddr import free_port
from farm.procs import signal_group

#: Top-level packages whose native libraries farmd's own process must not map: the
#: jobs load them in their children (the zygote, a cold attempt child).
HEAVY_PACKAGES = ("tvm", "tvm_ffi", "onnx", "onnxruntime", "scipy", "torch")


def start_process(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, stdout and stderr to ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM ``proc``'s process group, wait up to 60 s, then SIGKILL what is left."""
    signal_group(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=60)
    signal_group(proc.pid)
    proc.wait()


def write_config(path: Path, *, data_dir: Path, adb_port: int, apk: Path, api: bool,
                 api_port: int | None = None, top: str = "", sections: str = "") -> Path:
    """farmd's config: ``data_dir``, the private adb server, free ports, the API on or off.

    Everything else is a user's default (health sweep every 30 s, tick every 2 s,
    metrics on). ``top`` adds top-level TOML keys (``host_id = "a"``), ``sections``
    more TOML sections; ``api_port`` is the API's port (a free one when None).
    """
    path.write_text(
        f'data_dir = "{data_dir}"\nlog_level = "info"\n{top}'
        f"[adb]\nport = {adb_port}\n"
        f"[tracker]\nport = {free_port()}\n"
        f"[metrics]\nport = {free_port()}\n"
        f"[api]\nenabled = {'true' if api else 'false'}\n"
        f"port = {api_port or free_port()}\n"
        f'[apk]\npath = "{apk}"\n{sections}', encoding="utf-8")
    return path


@dataclass(frozen=True)
class Footprint:
    """One reading of a process: resident memory (VmRSS, MiB), threads, open fds."""

    rss_mib: float
    threads: int
    fds: int


def footprint(proc: psutil.Process) -> Footprint:
    """``proc``'s own :class:`Footprint` (not its children's); raises psutil.Error if it is gone."""
    with proc.oneshot():
        return Footprint(proc.memory_info().rss / 2**20, proc.num_threads(), proc.num_fds())


def heavy_mapped(pid: int) -> list[str]:
    """Which of :data:`HEAVY_PACKAGES` have a file mapped into process ``pid`` (``/proc/PID/maps``).

    A package's native extension is mapped from ``.../site-packages/<package>/`` once
    it is imported, so this tells from outside what a running farmd has loaded.
    """
    maps = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="replace")
    return [name for name in HEAVY_PACKAGES if f"/{name}/" in maps]
