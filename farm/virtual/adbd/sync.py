"""adbd's ``sync:`` service: file transfer for ``adb push``, ``pull`` and ``ls``.

Wire format and replies follow AOSP ``adb/file_sync_protocol.h`` and
``adb/daemon/file_sync_service.cpp``. Each request is ``id(4) length(u32 LE)``
plus ``length`` bytes of path (at most 1024). Implemented: STAT (v1), STA2 and
LST2 (``stat_v2``), LIST and LIS2 (``ls_v2``), SEND (v1: ``path,mode``; then
DATA chunks of at most 64 KiB and DONE carrying the mtime), RECV (v1), QUIT.
``sendrecv_v2`` is not advertised, so SND2/RCV2 are answered as unknown.

Failures are ``FAIL`` + u32 length + message, with adbd's texts (``"open
failed: No such file or directory"``); after a FAIL adbd ends the service,
so the stream closes. Device paths map to host files through
:meth:`farm.virtual.contracts.Userland.host_path`.
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

from farm.virtual.adbd.stream import Stream
from farm.virtual.contracts import Userland


def _id(text: str) -> int:
    return int.from_bytes(text.encode(), "little")


ID_STAT = _id("STAT")
ID_STA2 = _id("STA2")
ID_LST2 = _id("LST2")
ID_LIST = _id("LIST")
ID_LIS2 = _id("LIS2")
ID_DENT = _id("DENT")
ID_DNT2 = _id("DNT2")
ID_SEND = _id("SEND")
ID_RECV = _id("RECV")
ID_DATA = _id("DATA")
ID_DONE = _id("DONE")
ID_OKAY = _id("OKAY")
ID_FAIL = _id("FAIL")
ID_QUIT = _id("QUIT")

SYNC_DATA_MAX_BYTES = 64 * 1024
MAX_PATH_BYTES = 1024
SHELL_UID = 2000  # AID_SHELL: owner of what adb push writes to /data/local/tmp

_REQUEST = struct.Struct("<II")
_STAT_V1 = struct.Struct("<IIII")
_STAT_V2 = struct.Struct("<IIQQIIIIQqqq")
_DENT_V1 = struct.Struct("<IIIII")
_DENT_V2 = struct.Struct("<IIQQIIIIQqqqI")


class _SyncEnd(Exception):
    """The service must end (after QUIT, a FAIL, or a broken request)."""


def _fail(stream: Stream, message: str) -> None:
    data = message.encode()
    stream.write(_REQUEST.pack(ID_FAIL, len(data)) + data)


def _fail_errno(stream: Stream, what: str, exc: OSError) -> None:
    code = exc.errno or errno.EIO
    _fail(stream, f"{what}: {os.strerror(code)}")


def _resolve(userland: Userland, path: str, *, write: bool) -> Path:
    """Host path for ``path``; mapping refusals become OSErrors with errno."""
    try:
        return userland.host_path(path, write=write)
    except PermissionError as exc:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path) from exc
    except FileNotFoundError as exc:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path) from exc


def _v2_fields(st: os.stat_result) -> tuple[int, ...]:
    return (
        st.st_dev,
        st.st_ino,
        st.st_mode,
        st.st_nlink,
        SHELL_UID,
        SHELL_UID,
        st.st_size,
        int(st.st_atime),
        int(st.st_mtime),
        int(st.st_ctime),
    )


def _do_stat_v1(userland: Userland, stream: Stream, path: str) -> None:
    # adbd ignores lstat's failure and sends zeros: "remote object does not exist".
    try:
        st = os.lstat(_resolve(userland, path, write=False))
        fields = (st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime) & 0xFFFFFFFF)
    except OSError:
        fields = (0, 0, 0)
    stream.write(_STAT_V1.pack(ID_STAT, *fields))


def _do_stat_v2(userland: Userland, stream: Stream, path: str, request_id: int) -> None:
    try:
        host = _resolve(userland, path, write=False)
        st = os.stat(host) if request_id == ID_STA2 else os.lstat(host)
    except OSError as exc:
        stream.write(_STAT_V2.pack(request_id, exc.errno or errno.EIO, *([0] * 10)))
        return
    stream.write(_STAT_V2.pack(request_id, 0, *_v2_fields(st)))


def _do_list(userland: Userland, stream: Stream, path: str, *, v2: bool) -> None:
    try:
        host = _resolve(userland, path, write=False)
        names = [".", "..", *sorted(os.listdir(host))]
    except OSError:
        names, host = [], Path()
    for name in names:
        encoded = name.encode()
        try:
            st = os.lstat(host / name)
        except OSError as exc:
            if v2:
                stream.write(
                    _DENT_V2.pack(ID_DNT2, exc.errno or errno.EIO, *([0] * 10), len(encoded))
                    + encoded
                )
            continue
        if v2:
            stream.write(_DENT_V2.pack(ID_DNT2, 0, *_v2_fields(st), len(encoded)) + encoded)
        else:
            fields = (st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime) & 0xFFFFFFFF)
            stream.write(_DENT_V1.pack(ID_DENT, *fields, len(encoded)) + encoded)
    done = _DENT_V2.pack(ID_DONE, *([0] * 12)) if v2 else _DENT_V1.pack(ID_DONE, 0, 0, 0, 0)
    stream.write(done)


def _parse_mode(text: str) -> int:
    """``strtoul(text, nullptr, 0)``: hex with 0x, octal with a leading 0, else decimal."""
    text = text.strip()
    if text.lower().startswith("0x"):
        return int(text, 16)
    if len(text) > 1 and text.startswith("0"):
        return int(text, 8)
    return int(text or "0")


async def _discard_until_done(stream: Stream) -> None:
    """After a failed SEND adbd reads and drops DATA until DONE (file_sync_service.cpp)."""
    while True:
        request_id, size = _REQUEST.unpack(await stream.readexactly(_REQUEST.size))
        if request_id != ID_DATA:
            return
        await stream.readexactly(size)


async def _do_send(userland: Userland, stream: Stream, spec: str) -> None:
    path, comma, mode_text = spec.rpartition(",")
    if not comma:
        _fail(stream, "missing , in ID_SEND_V1")
        raise _SyncEnd
    try:
        mode = _parse_mode(mode_text)
    except ValueError:
        _fail(stream, "bad mode")
        raise _SyncEnd from None
    # send_impl: copy the user permission bits to group and other.
    mode &= 0o777
    mode |= (mode >> 3) & 0o070
    mode |= (mode >> 3) & 0o007
    try:
        host = _resolve(userland, path, write=True)
        host.parent.mkdir(parents=True, exist_ok=True)  # fixed_push_mkdir
        if host.is_file() or host.is_symlink():
            host.unlink()
        # Blocking writes of <= 64 KiB to local disk take less than a loop tick; a
        # thread hop per DATA chunk would cost more than it saves.
        handle = open(host, "wb")  # noqa: SIM115 - closed in the finally below
    except OSError as exc:
        _fail_errno(stream, "couldn't create file", exc)
        await _discard_until_done(stream)
        raise _SyncEnd from exc
    free_bytes = userland.storage_free_bytes()
    written = 0
    try:
        while True:
            request_id, size = _REQUEST.unpack(await stream.readexactly(_REQUEST.size))
            if request_id == ID_DONE:
                mtime_s = size
                break
            if request_id != ID_DATA:
                _fail(stream, "invalid data message")
                raise _SyncEnd
            if size > SYNC_DATA_MAX_BYTES:
                _fail(stream, "oversize data message")
                raise _SyncEnd
            data = await stream.readexactly(size)
            written += len(data)
            if written > free_bytes:
                _fail(stream, f"write failed: {os.strerror(errno.ENOSPC)}")
                await _discard_until_done(stream)
                raise _SyncEnd
            handle.write(data)
    finally:
        handle.close()
    os.chmod(host, mode)
    os.utime(host, (mtime_s, mtime_s))
    stream.write(_REQUEST.pack(ID_OKAY, 0))


async def _do_recv(userland: Userland, stream: Stream, path: str) -> None:
    try:
        host = _resolve(userland, path, write=False)
        if host.is_dir():
            _fail(stream, f"read failed: {os.strerror(errno.EISDIR)}")
            raise _SyncEnd
        handle = open(host, "rb")  # noqa: SIM115 - as in _do_send
    except OSError as exc:
        _fail_errno(stream, "open failed", exc)
        raise _SyncEnd from exc
    try:
        while True:
            chunk = handle.read(SYNC_DATA_MAX_BYTES)
            if not chunk:
                break
            stream.write(_REQUEST.pack(ID_DATA, len(chunk)) + chunk)
            await stream.drain()
    finally:
        handle.close()
    stream.write(_REQUEST.pack(ID_DONE, 0))


async def serve_sync(userland: Userland, stream: Stream) -> None:
    """Serve sync requests on ``stream`` until QUIT, a failure, or the host closes."""
    try:
        while True:
            try:
                header = await stream.readexactly(_REQUEST.size)
            except Exception:  # noqa: BLE001 - "command read failure" ends the service
                return
            request_id, length = _REQUEST.unpack(header)
            if length > MAX_PATH_BYTES:
                _fail(stream, "path too long")
                return
            path = (await stream.readexactly(length)).decode(errors="surrogateescape")
            if request_id == ID_STAT:
                _do_stat_v1(userland, stream, path)
            elif request_id in (ID_STA2, ID_LST2):
                _do_stat_v2(userland, stream, path, request_id)
            elif request_id in (ID_LIST, ID_LIS2):
                _do_list(userland, stream, path, v2=request_id == ID_LIS2)
            elif request_id == ID_SEND:
                await _do_send(userland, stream, path)
            elif request_id == ID_RECV:
                await _do_recv(userland, stream, path)
            elif request_id == ID_QUIT:
                return
            else:
                _fail(stream, f"unknown command {request_id:08x}")
                return
    except _SyncEnd:
        return

