"""farm's own copies of the users' ONNX models, one file per content.

::

    <data_dir>/models/<sha256>.onnx     0600, in a 0700 folder

``farmctl enqueue`` copies every model file a spec names (the kind's
``Kind.input_files``) into this store and rewrites the spec to point at the copy,
so a job never reads a path on the user's machine: the user may edit, move or
delete the file while the job waits. The name is the SHA-256 of the bytes, so a
model enqueued a hundred times is stored once, and a stored file is never
changed: the digest recorded in the spec stays true.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from farm.errors import SpecError
from farm.privacy import private_dir, write_private

__all__ = ["MODELS_DIR", "StoredModel", "model_digest", "store_model", "store_spec_models"]

#: The store's folder under the data folder.
MODELS_DIR = "models"


@dataclass(frozen=True)
class StoredModel:
    """A model file in the store.

    Attributes:
        sha256: hex SHA-256 of the file's bytes.
        path: ``<data_dir>/models/<sha256>.onnx``.
    """

    sha256: str
    path: Path


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


def store_model(src: Path, data_dir: Path, field: str = "params.path") -> StoredModel:
    """Copy a checked ONNX model into the store, once per content.

    Args:
        src: the user's ``.onnx`` file.
        data_dir: farm's data folder.
        field: the spec field that named ``src``, for errors (``farmctl`` turns it
            into the flag, e.g. ``--model``).

    Returns:
        The stored copy; the same for every file with the same bytes.

    Raises:
        SpecError: ``src`` is missing, unreadable, or not a valid ONNX model
            (``onnx.load`` and ``onnx.checker.check_model``).
        OSError: the store cannot be written.
    """
    import onnx
    from google.protobuf.message import Error as ProtobufError  # type: ignore[import-untyped]

    try:
        src = Path(src).expanduser()
        if not src.is_file():
            raise SpecError(field, f"no such file: {str(src)!r}")
        data = src.read_bytes()
    except RuntimeError:  # expanduser of ~nosuchuser
        raise SpecError(field, f"no such user's home: {str(src)!r}") from None
    except OSError as exc:  # unreadable, a name too long...
        raise SpecError(field, f"cannot read {str(src)!r}: {exc.strerror}") from None
    try:
        onnx.checker.check_model(onnx.load_model_from_string(data))
    except (ProtobufError, onnx.checker.ValidationError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpecError(field, f"not an ONNX model: {src.name}: {reason}") from None
    sha256 = hashlib.sha256(data).hexdigest()
    path = private_dir(Path(data_dir) / MODELS_DIR) / f"{sha256}.onnx"
    if not path.is_file():  # written atomically: a file there is whole
        write_private(path, data)
    return StoredModel(sha256, path)


def store_spec_models(raw: Mapping[str, Any], fields: Sequence[str], data_dir: Path
                      ) -> dict[str, Any]:
    """A raw spec with the model files it names stored, and pointing at the copies.

    Args:
        raw: the spec as built from flags (JSON data, not validated yet).
        fields: dotted paths of model file fields (``Kind.input_files``), e.g.
            ``"params.model.path"``; a field absent or not a string is left to
            the spec's validation.
        data_dir: farm's data folder.

    Returns:
        A copy of ``raw`` where each such field is the stored path, its sibling
        ``sha256`` (``params.model.sha256``) the file's digest and ``name`` the
        user's file name (for people reading results).

    Raises:
        SpecError: a named file is missing, unreadable or not an ONNX model,
            naming the field.
    """
    out: dict[str, Any] = _copy(raw)
    for field in fields:
        *parents, name = field.split(".")
        holder: Any = out
        for part in parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if not isinstance(holder, dict) or not isinstance(holder.get(name), str):
            continue
        src = holder[name]
        stored = store_model(Path(src), data_dir, field)
        holder.update({name: str(stored.path), "sha256": stored.sha256, "name": Path(src).name})
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    return value
