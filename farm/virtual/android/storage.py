"""The phone's storage: device paths mapped onto a host folder.

Android's permissions hold for the shell user (uid 2000) and for ``run-as`` apps.

Layout under ``data_dir``::

    fs/data/local/tmp        /data/local/tmp (shell rw)
    fs/sdcard                /sdcard = /storage/emulated/0 (shell rw)
    fs/data/app              /data/app (installed APKs; shell may read files)
    fs/data/data/<pkg>       /data/data/<pkg> = /data/user/0/<pkg> (the app, or run-as)
    state/                   the phone's persistent settings and packages (JSON)
    generated/               snapshots of /proc and /sys files for sync pulls

Files under ``/proc`` and ``/sys`` are not stored; the shell renders them on
read (see :mod:`farm.virtual.android.sysfiles`).
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

# Aliases of the primary external storage, as on Android 11+ (/sdcard is a
# symlink to /storage/self/primary, which points to /storage/emulated/0).
_SDCARD_ALIASES = ("/sdcard", "/storage/self/primary", "/mnt/sdcard", "/storage/emulated/0")
_USER0 = "/data/user/0"

# Top-level entries of a real Android 13 root (``ls /`` as shell).
ROOT_ENTRIES = (
    "acct", "apex", "bin", "bugreports", "cache", "config", "d", "data", "data_mirror",
    "debug_ramdisk", "dev", "etc", "init", "init.environ.rc", "linkerconfig", "lost+found",
    "metadata", "mnt", "odm", "odm_dlkm", "oem", "postinstall", "proc", "product",
    "sdcard", "second_stage_resources", "storage", "sys", "system", "system_dlkm",
    "system_ext", "vendor", "vendor_dlkm",
)  # fmt: skip


def normalize(device_path: str, cwd: str = "/") -> str:
    """Absolute, normalized device path with storage aliases resolved.

    Args:
        device_path: absolute or relative to ``cwd``.
        cwd: the shell's working directory.

    Returns:
        e.g. ``/storage/emulated/0/x`` for ``/sdcard/x``, ``/data/data/p`` for
        ``/data/user/0/p``.
    """
    path = posixpath.normpath(posixpath.join(cwd, device_path))
    if path.startswith("//"):
        path = path[1:]
    for alias in _SDCARD_ALIASES:
        if path == alias or path.startswith(alias + "/"):
            return "/storage/emulated/0" + path[len(alias) :]
    if path == _USER0 or path.startswith(_USER0 + "/"):
        return "/data/data" + path[len(_USER0) :]
    return path


class Storage:
    """Maps device paths to host paths and enforces who may touch them.

    Args:
        data_dir: the phone's host folder; created if missing.
    """

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "fs"
        self.state_dir = data_dir / "state"
        self.generated_dir = data_dir / "generated"
        for sub in ("data/local/tmp", "sdcard", "data/app", "data/data"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.generated_dir.mkdir(parents=True, exist_ok=True)

    def backing(self, device_path: str) -> Path | None:
        """The host path for a normalized device path, or None if not stored."""
        if device_path == "/storage/emulated/0" or device_path.startswith("/storage/emulated/0/"):
            return self.root / "sdcard" / device_path[len("/storage/emulated/0/") :]
        for prefix in ("/data/local/tmp", "/data/app", "/data/data"):
            if device_path == prefix or device_path.startswith(prefix + "/"):
                return self.root / device_path.lstrip("/")
        return None

    def check(self, device_path: str, *, write: bool, app: str | None = None) -> Path:
        """Host path for ``device_path`` if the caller may access it.

        Args:
            device_path: normalized absolute device path.
            write: whether the caller wants to create, change or remove it.
            app: the package whose uid the caller runs as (``run-as``), or None
                for the shell user.

        Raises:
            PermissionError: SELinux/DAC would deny the shell user (or the app).
            FileNotFoundError: the path is not part of the emulated storage.
        """
        host = self.backing(device_path)
        if device_path.startswith("/data/data"):
            rest = device_path[len("/data/data") :].lstrip("/")
            owner = rest.split("/", 1)[0]
            if app is None or owner != app:
                raise PermissionError(device_path)
        elif device_path.startswith("/data/app") and (write or device_path == "/data/app"):
            raise PermissionError(device_path)
        if host is None:
            if write or device_path in ("/data", "/data/local", "/storage", "/storage/emulated"):
                raise PermissionError(device_path)
            raise FileNotFoundError(device_path)
        return host

    def app_dir(self, package: str) -> Path:
        """Host folder of ``/data/data/<package>``."""
        return self.root / "data" / "data" / package

    def free_bytes(self, total_kb: int, base_used_kb: int, filler_bytes: int) -> int:
        """Free bytes on /data given the spec's size, its base usage and stored files."""
        used = base_used_kb * 1024 + self.used_bytes() + filler_bytes
        return max(0, total_kb * 1024 - used)

    def used_bytes(self) -> int:
        """Bytes stored by the phone's files (apps, tmp, sdcard).

        The app makes and removes a folder per RPC session meanwhile
        (``cache/rpc-session-*``): a folder or file gone during the walk counts
        as gone. ``Path.rglob`` raised ``FileNotFoundError`` there, which ended
        the whole ``df`` (and the health reading's shell with it) without
        output: the host read ``link lost`` and a job's thermal gate failed,
        costing it a try (seen in ``TestTrackerOutage``'s noisy rerun, which
        reads the phone while the first session's folder goes).
        """
        total = 0
        for folder, _, files in os.walk(self.root):  # a folder that vanished is skipped
            for name in files:
                try:
                    info = os.stat(os.path.join(folder, name))
                except OSError:  # removed since the folder was listed
                    continue
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
        return total
