"""Parse toybox ``df -k`` (or plain ``df``, which toybox prints in 1K blocks).

Layout (``landley/toybox`` ``toys/posix/df.c``): header
``Filesystem  1K-blocks  Used Available Use% Mounted on``, then one row per
filesystem. Column widths are measured from the widest cell, so rows are split
on whitespace, never by column position. ``Mounted on`` is the last column and
is not padded.

Quirk: ``df -k /data`` names ``/data/user/0``, not ``/data``: toybox reports the
*last* mount with the same ``st_dev``, and ``/data/user/0`` is a later bind mount
of ``/data`` (Honor X8b capture in ``tests/fixtures/android``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from farm.device._text import as_text, excerpt

_HEADER = ("Filesystem", "1K-blocks", "Used", "Available", "Use%", "Mounted", "on")


@dataclass(frozen=True)
class Filesystem:
    """One row of ``df -k``.

    Attributes:
        source: the device, e.g. ``/dev/block/dm-7`` or ``tmpfs``.
        size_kb: size in KiB (1024-byte blocks).
        used_kb: used KiB.
        available_kb: KiB available to unprivileged users.
        use_pct: the ``Use%`` column, 0..100.
        mount: the mount point as printed (may be a bind mount, see module doc).
    """

    source: str
    size_kb: int
    used_kb: int
    available_kb: int
    use_pct: int
    mount: str

    @property
    def free_bytes(self) -> int:
        """Bytes available to unprivileged users (``available_kb * 1024``)."""
        return self.available_kb * 1024


def parse_df_k(output: str | bytes) -> list[Filesystem]:
    """Parse ``df -k [path]`` output.

    Args:
        output: what ``df -k`` printed (stdout).

    Returns:
        The filesystems in printed order.

    Raises:
        ValueError: the header is not the 1K-block one (e.g. ``df -h`` output)
            or a row does not have six readable columns.
    """
    lines = [line for line in as_text(output).split("\n") if line.strip()]
    if not lines or tuple(lines[0].split()) != _HEADER:
        first = excerpt(lines[0]) if lines else ""
        raise ValueError(f"df -k: expected header {' '.join(_HEADER)!r}, got {first!r}")
    filesystems = []
    for line in lines[1:]:
        cells = line.split(maxsplit=5)
        if len(cells) != 6 or not cells[4].endswith("%"):
            raise ValueError(f"df -k: cannot read row {line!r}")
        try:
            size_kb, used_kb, available_kb = (int(cell) for cell in cells[1:4])
            use_pct = int(cells[4][:-1])
        except ValueError:
            raise ValueError(f"df -k: non-numeric column in row {line!r}") from None
        filesystems.append(Filesystem(cells[0], size_kb, used_kb, available_kb, use_pct, cells[5]))
    return filesystems


def _contains(mount: str, path: str) -> bool:
    """Whether ``path`` lies on or under the mount point ``mount``."""
    return mount in (path, "/") or path.startswith(mount.rstrip("/") + "/")


def free_bytes_for(filesystems: Sequence[Filesystem], path: str) -> int:
    """Return the bytes available on the filesystem that holds ``path``.

    The filesystem is the one with the longest mount point containing
    ``path``. If none does, a filesystem mounted *under* ``path`` is accepted
    when it is the only row: that is ``df -k /data`` printing ``/data/user/0``
    (see module doc).

    Args:
        filesystems: rows from :func:`parse_df_k`.
        path: an absolute path on the phone, e.g. ``/data`` or ``/data/local/tmp``.

    Returns:
        Available bytes.

    Raises:
        ValueError: no filesystem holds ``path``.
    """
    holding = [fs for fs in filesystems if _contains(fs.mount, path)]
    if holding:
        return max(holding, key=lambda fs: len(fs.mount)).free_bytes
    if len(filesystems) == 1 and _contains(path, filesystems[0].mount):
        return filesystems[0].free_bytes
    mounts = ", ".join(fs.mount for fs in filesystems) or "none"
    raise ValueError(f"df -k: no filesystem holds {path!r} (mounts: {mounts})")
