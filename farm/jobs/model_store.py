"""Users' ONNX models as job inputs: stored in the database by SHA-256, cached per host.

::

    blobs table                          the model's bytes, by their SHA-256 (every host reads it)
    <data_dir>/models/<sha256>.onnx      this host's cached copy, 0600 in a 0700 folder

``farmctl enqueue`` stores every model file a spec names (the kind's
``Kind.input_files``) as a blob (:meth:`farm.queue.store.Store.put_blob`) and
rewrites the spec to name it: ``sha256`` and ``name`` (the user's file name, for
people reading results) replace ``path`` (:func:`store_spec_models`). So a job
never reads a path on the user's machine (which they may edit, move or delete
while the job waits), and whichever host runs it reads the same bytes: its
attempt writes the blob into that host's cache, checked against the digest,
before compiling (:func:`materialise`). A model enqueued a hundred times is
stored once, and a blob is never changed: the digest in the spec stays true.

The HTTP API takes the model's bytes instead of a path: :func:`put_model`, then
:func:`spec_with_blob` on the raw spec before enqueueing it.

A spec that names only a ``path`` (written by hand, a ``[[schedules]]`` entry)
still runs, reading that file, on a host that has it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from farm.errors import SpecError
from farm.privacy import private_dir, write_private

__all__ = ["MODELS_DIR", "StoredModel", "check_onnx", "materialise", "model_digest", "put_model",
           "spec_with_blob", "store_model", "store_spec_models"]

#: The cache's folder under the data folder.
MODELS_DIR = "models"


class BlobOps(Protocol):
    """The blobs as this module uses them; :class:`farm.queue.store.Store` is one.

    A protocol, not the queue's class: the jobs sit below the queue
    (docs/architecture.md, "Floors"), so they name only what they call.
    """

    def put_blob(self, data: bytes | Path, now: datetime) -> str:
        """Store ``data`` once by its SHA-256 and return that digest (hex)."""
        ...

    def get_blob(self, sha256: str) -> bytes | None:
        """The bytes of blob ``sha256``; None if there is none."""
        ...


@dataclass(frozen=True)
class StoredModel:
    """A model stored as a blob.

    Attributes:
        sha256: hex SHA-256 of the file's bytes: the blob's name.
        name: the user's file name, e.g. ``small_cnn.onnx``.
    """

    sha256: str
    name: str


def model_digest(path: Path) -> str:
    """Hex SHA-256 of a file's bytes.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_onnx(data: bytes | Path, name: str, field: str) -> None:
    """Refuse bytes, or a file, that are not a valid ONNX model.

    Given a file, ``onnx.checker.check_model`` parses it in C++ from a stream,
    never holding it in Python: 200 MB of zeros is refused with under a
    megabyte of memory (measured, issue 26). Its messages name the file it
    read ("Unable to parse proto from file: /..."): the user's ``name`` takes
    its place, so an upload's spooled path on the server never reaches a client.

    Raises:
        SpecError: ``onnx.load`` or ``onnx.checker.check_model`` refuses ``data``,
            naming ``field`` and the file ``name``.
    """
    import onnx
    from google.protobuf.message import Error as ProtobufError  # type: ignore[import-untyped]

    if (data.stat().st_size if isinstance(data, Path) else len(data)) == 0:
        raise SpecError(field, f"not an ONNX model: {name} is empty")
    try:
        onnx.checker.check_model(str(data) if isinstance(data, Path)
                                 else onnx.load_model_from_string(data))
    except (ProtobufError, onnx.checker.ValidationError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(data, Path):
            reason = reason.replace(str(data), name)
        raise SpecError(field, f"not an ONNX model: {name}: {reason}") from None


def put_model(store: BlobOps, data: bytes | Path, name: str, now: datetime,
              field: str = "params.path") -> StoredModel:
    """Check model bytes (e.g. uploaded through the HTTP API) and store them as a blob.

    Args:
        store: the queue.
        data: the ONNX file's bytes, or a file holding them (an upload spooled
            to disk: checked from the file, read only once it passed).
        name: the user's file name (shown in results, never opened).
        now: when stored.
        field: the spec field the model is for, for errors.

    Returns:
        The stored model; the same sha256 for every upload of the same bytes.

    Raises:
        SpecError: ``data`` is not a valid ONNX model.
        StoreError: the database refused the write.
    """
    check_onnx(data, name, field)
    return StoredModel(store.put_blob(data, now), name)


def store_model(src: Path, store: BlobOps, now: datetime, field: str = "params.path"
                ) -> StoredModel:
    """Read a user's ONNX file, check it and store it as a blob, once per content.

    Args:
        src: the user's ``.onnx`` file.
        store: the queue.
        now: when stored.
        field: the spec field that named ``src``, for errors (``farmctl`` turns it
            into the flag, e.g. ``--model``).

    Raises:
        SpecError: ``src`` is missing, unreadable, or not a valid ONNX model.
        StoreError: the database refused the write.
    """
    try:
        src = Path(src).expanduser()
        if src.is_dir():
            raise SpecError(field, f"{str(src)!r} is a folder, not an ONNX file")
        if not src.is_file():
            raise SpecError(field, f"no such file: {str(src)!r}")
        data = src.read_bytes()
    except RuntimeError:  # expanduser of ~nosuchuser
        raise SpecError(field, f"no such user's home: {str(src)!r}") from None
    except OSError as exc:  # unreadable, a name too long...
        raise SpecError(field, f"cannot read {str(src)!r}: {exc.strerror}") from None
    return put_model(store, data, src.name, now, field)


def spec_with_blob(raw: Mapping[str, Any], field: str, sha256: str, name: str
                   ) -> dict[str, Any]:
    """A copy of a raw spec whose model field names a stored blob instead of a path.

    Args:
        raw: the spec (JSON data, not validated yet).
        field: the dotted path of the model's file field (``Kind.input_files``),
            e.g. ``"params.path"`` or ``"params.model.path"``; the objects on the
            way are created if missing.
        sha256: the blob (:meth:`Store.put_blob`, :func:`put_model`).
        name: the user's file name, shown in results.

    Returns:
        ``raw`` with the field removed and its siblings ``sha256`` and ``name`` set,
        e.g. ``{"params": {"sha256": "ab12...", "name": "small_cnn.onnx", ...}}``.
    """
    out: dict[str, Any] = _copy(raw)
    *parents, key = field.split(".")
    holder = out
    for part in parents:
        if not isinstance(holder.get(part), dict):
            holder[part] = {}
        holder = holder[part]
    holder.pop(key, None)
    holder.update(sha256=sha256, name=name)
    return out


def store_spec_models(raw: Mapping[str, Any], fields: Sequence[str], store: BlobOps,
                      now: datetime) -> dict[str, Any]:
    """A raw spec with the model files it names stored as blobs, and naming them.

    Args:
        raw: the spec as built from flags (JSON data, not validated yet).
        fields: dotted paths of model file fields (``Kind.input_files``), e.g.
            ``"params.model.path"``; a field absent or not a string is left to
            the spec's validation.
        store: the queue.
        now: when stored.

    Returns:
        A copy of ``raw`` where each such field is replaced by its siblings
        ``sha256`` (the blob) and ``name`` (the user's file name).

    Raises:
        SpecError: a named file is missing, unreadable or not an ONNX model,
            naming the field.
        StoreError: the database refused the write.
    """
    out: dict[str, Any] = _copy(raw)
    for field in fields:
        *parents, key = field.split(".")
        holder: Any = out
        for part in parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if not isinstance(holder, dict) or not isinstance(holder.get(key), str):
            continue
        stored = store_model(Path(holder[key]), store, now, field)
        out = spec_with_blob(out, field, stored.sha256, stored.name)
    return out


def materialise(store: BlobOps | None, sha256: str, data_dir: Path,
                field: str = "params.sha256") -> Path:
    """This host's cached copy of blob ``sha256``, written from the database if missing.

    A cached file whose bytes do not hash to ``sha256`` (damaged) is rewritten.
    The file is written atomically, so a reader never sees half of it.

    Args:
        store: the queue the blob is read from; None reads only the cache.
        sha256: the model's blob.
        data_dir: this host's data folder.
        field: the spec field naming the blob, for errors.

    Returns:
        ``<data_dir>/models/<sha256>.onnx``.

    Raises:
        SpecError: no such blob (and no cached copy): the job names a model this
            database does not hold.
        StoreError: the stored blob is damaged or cannot be read.
        OSError: the cache cannot be written.
    """
    path = Path(data_dir) / MODELS_DIR / f"{sha256}.onnx"
    if path.is_file() and model_digest(path) == sha256:
        return path
    data = None if store is None else store.get_blob(sha256)
    if data is None:
        raise SpecError(field, f"model {sha256[:12]} is not stored in the database; "
                        "enqueue the job again from its file")
    private_dir(path.parent)
    write_private(path, data)
    return path


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    return value
