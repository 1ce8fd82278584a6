"""The first check of every APK apk_tools reads: a file, and a complete zip.

align, sign, verify and inspect call :func:`apk_entries` before running a tool
on an APK, so that a folder, a missing path or a truncated download is named
as what it is, instead of surfacing as an external tool's message about
something else (apksigner reports a truncated APK as a keystore-side
``ApkFormatException`` stack trace; ``Path.is_file()`` calls a folder "no such
file").
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

from farm.errors import ApkError

__all__ = ["apk_entries"]


def apk_entries(path: Path, *, check_crc: bool = False) -> list[str]:
    """The entry names of the APK at ``path``, after checking it can be read as a zip.

    Args:
        path: the ``.apk`` file.
        check_crc: also read every entry and check its CRC-32 (reads the whole
            file; verification by apksigner covers this for signed APKs).

    Returns:
        The zip's entry names, in central-directory order.

    Raises:
        ApkError: ``path`` is missing, a folder, not a regular file or
            unreadable; or the zip is corrupt (truncated, not a zip, an entry
            failing its CRC).
    """
    path = Path(path)
    if path.is_dir():
        raise ApkError(str(path), "is a folder, not an APK file")
    if not path.exists():
        raise ApkError(str(path), "no such file")
    if not path.is_file():
        raise ApkError(str(path), "not a regular file")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            bad_entry = archive.testzip() if check_crc else None
    except PermissionError as exc:
        raise ApkError(str(path), f"cannot read: {exc.strerror}") from exc
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise ApkError(str(path), f"corrupt APK: not a valid zip file, truncated or not an APK "
                                  f"({exc})") from exc
    if bad_entry is not None:
        raise ApkError(str(path), f"corrupt APK: zip entry {bad_entry} fails its CRC check")
    return names
