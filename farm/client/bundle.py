"""A finished tune's bundle as the API sends it (the dashboard's zip), unpacked into a folder."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from farm.errors import InfraFault, SpecError

__all__ = ["unpack_bundle"]


def unpack_bundle(data: bytes, top: str, folder: Path) -> None:
    """Write the files of zip ``data`` under its folder ``top`` into ``folder``.

    Every member is checked before anything is written, so a bad archive leaves
    ``folder`` as it was.

    Raises:
        InfraFault: ``data`` is no zip, or a member lies outside ``top`` (or
            climbs out of it with ``..``).
        SpecError: ``folder`` cannot be written (field ``out``).
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise InfraFault("the farm server's bundle is not a zip archive") from None
    with archive:
        members: list[tuple[zipfile.ZipInfo, Path]] = []
        for member in archive.infolist():  # all checked before anything is written
            relative = Path(member.filename[len(top):])
            if (not member.filename.startswith(top) or relative.is_absolute()
                    or ".." in relative.parts):
                raise InfraFault(f"the farm server's bundle holds {member.filename!r}, "
                                 f"outside {top}")
            if not member.is_dir() and relative.parts:
                members.append((member, relative))
        try:
            for member, relative in members:
                (folder / relative).parent.mkdir(parents=True, exist_ok=True)
                (folder / relative).write_bytes(archive.read(member))
        except OSError as exc:
            raise SpecError("out", f"cannot write the bundle into {folder}: "
                                   f"{exc.strerror or exc}") from None
