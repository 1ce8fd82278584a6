"""Private by default: what farm writes is readable by its own user only.

farm's data folder holds the queue (``farm.db``: specs, results, device
events), the settings each job's child reads (``runs/settings.json``, whose
``database_url`` may carry a PostgreSQL password), logs and signing keys. Under
the common 022 umask they would be world-readable (folder 0755, files 0644).

So the entry points (``farmd``, ``farmctl``) call :func:`restrict_umask` first:
every file and folder they and their children create is then 0600 / 0700. The
data folder itself is made or tightened by :func:`private_dir` (a folder made
by an earlier farm under 022 stays 0755 otherwise), and files that hold a
secret are written by :func:`write_private`, which does not depend on the
umask at all (a library caller, a test, may not have set it).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "PRIVATE_UMASK", "private_dir",
           "restrict_umask", "write_private"]

#: Bits the umask always clears: nothing for group and others.
PRIVATE_UMASK = 0o077
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def restrict_umask() -> int:
    """Add :data:`PRIVATE_UMASK` to this process's umask (its children inherit it).

    A stricter umask the user already set is kept (the bits are or-ed).

    Returns:
        The previous umask.
    """
    previous = os.umask(PRIVATE_UMASK)
    os.umask(previous | PRIVATE_UMASK)
    return previous


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) if needed and make it 0700.

    Only a folder this user owns is tightened; the parents are created with
    the process umask and left as they are (``~/.local/share`` is not farm's).

    Returns:
        ``path``.

    Raises:
        OSError: it cannot be created (a file is in the way, no permission).
    """
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    info = path.stat()
    if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) != PRIVATE_DIR_MODE:
        path.chmod(PRIVATE_DIR_MODE)
    return path


def write_private(path: Path, data: str | bytes) -> Path:
    """Replace ``path`` atomically with ``data`` (str as UTF-8), readable by this user only (0600).

    Readers never see a half-written file: the data goes to a 0600 temporary
    file in the same folder first, then replaces ``path``.

    Returns:
        ``path``.

    Raises:
        OSError: the folder is missing or not writable.
    """
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:  # mkstemp makes it 0600
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    return path
